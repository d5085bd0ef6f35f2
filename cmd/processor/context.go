package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/events"
)

// runContext asks the context service for a session's packed context,
// exactly as a prompt builder gets it, and prints the prompt text it
// renders (or the reply as is, with --json).
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o options
	fs := newClientFlagSet("processor context", &o)
	fs.SetOutput(stderr)
	session := fs.String("session", "", "session id (required)")
	query := fs.String("query", "", "the live question the prompt answers: the service may add what matches it")
	budgetChars := fs.Int("budget-chars", 0, "bound the context to this many characters (0 = unlimited)")
	budgetTokens := fs.Int("budget-tokens", 0, "bound the context to this many tokens (0 = unlimited)")
	recallTurns := fs.Int("recall-turns", 0, fmt.Sprintf("with --query: the most earlier turns recalled as best matches, 1..%d (0 = as many as fit a budget, else %d)", client.MaxRecallTurns, client.DefaultRecallTurns))
	asJSON := fs.Bool("json", false, "print the service's reply as is (JSON) instead of the prompt text")
	if err := parseSessionOptions(fs, &o, args, session); err != nil {
		return err
	}
	if *session == "" {
		return errors.New("session: required, the session whose context to print (processor context S, or --session S)")
	}
	if err := events.CheckSession("--session", *session); err != nil {
		return err
	}
	if *budgetChars < 0 || *budgetTokens < 0 {
		return fmt.Errorf("--budget-chars and --budget-tokens: expected 0 (unlimited) or more, got %d and %d", *budgetChars, *budgetTokens)
	}
	if *recallTurns < 0 || *recallTurns > client.MaxRecallTurns || *recallTurns > 0 && *query == "" {
		return fmt.Errorf("--recall-turns: expected 1..%d with --query (0 = the service's default), got %d", client.MaxRecallTurns, *recallTurns)
	}
	t, err := openTool(&o, stderr, "context")
	if err != nil {
		return err
	}
	defer t.close()
	data, err := t.request(ctx, client.EndpointContext, client.ContextRequest{
		Session: *session, Query: *query, BudgetChars: *budgetChars, BudgetTokens: *budgetTokens, RecallTurns: *recallTurns,
	})
	if err != nil {
		return err
	}
	if *asJSON {
		_, err := fmt.Fprintf(stdout, "%s\n", data)
		return err
	}
	var c client.Context
	if err := json.Unmarshal(data, &c); err != nil {
		return fmt.Errorf("context reply: %w", err)
	}
	fmt.Fprintf(stdout, "# session %s: %d turns, cursor %d; this context: %d chars, %d tokens", c.Session, c.TotalTurns, c.Cursor, c.Chars, c.Tokens)
	if c.DroppedTurns > 0 || c.SummaryDropped || c.EvictionDropped {
		// With a query, the window's older turns give way to the excerpts
		// as well as to the budget (dropped_turns counts both).
		if c.Query != "" {
			fmt.Fprintf(stdout, "; for the query: %d oldest turns not among the recent turns", c.DroppedTurns)
		} else {
			fmt.Fprintf(stdout, "; over budget: %d oldest turns left out", c.DroppedTurns)
		}
		if c.SummaryDropped || c.EvictionDropped {
			fmt.Fprint(stdout, ", summary left out")
		}
	}
	if c.FoldInFlight {
		fmt.Fprint(stdout, "; a fold is in flight")
	}
	fmt.Fprintln(stdout)
	_, err = io.WriteString(stdout, c.Prompt())
	return err
}
