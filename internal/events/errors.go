package events

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// Rejection codes: stable, machine-readable, carried in the dead letter's
// Foldstream-Error-Code header.
const (
	CodeBadJSON         = "bad_json"
	CodeMissingField    = "missing_field"
	CodeInvalidField    = "invalid_field"
	CodeBadSession      = "bad_session"
	CodeSessionMismatch = "session_mismatch"
	CodeOversized       = "oversized"
	CodeUnknownType     = "unknown_type"
	CodeBadSubject      = "bad_subject"
	CodeVersion         = "unsupported_version"
	CodeSessionEnded    = "session_ended"
)

// ValidationError says which field is wrong and what was expected.
type ValidationError struct {
	Code   string
	Field  string
	Reason string
}

func (e *ValidationError) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return fmt.Sprintf("field %q: %s", e.Field, e.Reason)
}

// AsValidation returns the *ValidationError inside err, if any.
func AsValidation(err error) (*ValidationError, bool) {
	var ve *ValidationError
	ok := errors.As(err, &ve)
	return ve, ok
}

func missing(field, expected string) error {
	return &ValidationError{Code: CodeMissingField, Field: field, Reason: "required, expected " + expected}
}

func invalid(field, format string, args ...any) error {
	return &ValidationError{Code: CodeInvalidField, Field: field, Reason: fmt.Sprintf(format, args...)}
}

// truncateForError keeps error messages short and valid UTF-8 when they echo
// user input.
func truncateForError(s string) string {
	const max = 40
	if !utf8.ValidString(s) {
		s = string([]rune(s)) // replaces invalid bytes with U+FFFD
	}
	r := []rune(s)
	if len(r) > max {
		return string(r[:max]) + "…"
	}
	return s
}
