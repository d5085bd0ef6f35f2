package schema_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/foldstream/foldstream/internal/events"
)

// The numeric fields of a turn have the ranges the processor checks: both
// ends accepted by the schema and by the processor, one past either end
// (and 2^31, which once corrupted checkpoints) rejected by both, with the
// processor's error naming the field and the range.
func TestTurnNumberRangesMatchTheProcessor(t *testing.T) {
	schemas := compileAll(t)
	const turn = `{"v":1,"session":"s1","turn_id":"t1","at":"2026-11-22T20:00:00Z","speaker":"Alice","role":"user","text":"hi"}`
	for _, field := range []string{"tokens", "context_tokens"} {
		for value, ok := range map[string]bool{
			"0": true, "1": true, fmt.Sprint(events.MaxTokens): true,
			fmt.Sprint(events.MaxTokens + 1): false, "2147483648": false, "9223372036854775807": false, "-1": false, "1.5": false,
		} {
			doc := strings.TrimSuffix(turn, "}") + `,"` + field + `":` + value + `}`
			schemaErr := validate(schemas["turn"], []byte(doc))
			_, codeErr := events.DecodeInbound("turn", "s1", []byte(doc), events.Limits{})
			if (schemaErr == nil) != ok || (codeErr == nil) != ok {
				t.Errorf("%s = %s: want accepted %v; schema: %v; processor: %v", field, value, ok, schemaErr, codeErr)
			}
			if ve, isVE := events.AsValidation(codeErr); codeErr != nil && (!isVE || ve.Field != field) {
				t.Errorf("%s = %s: the error does not name the field: %v", field, value, codeErr)
			}
		}
	}
}
