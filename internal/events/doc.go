// Package events holds foldstream's v1 wire contract: the inbound events a
// bot publishes (turn, note, control), the outbound events the processor
// publishes (summary-updated, lifecycle), their subjects, validation and
// codec. Everything a user can get wrong is reported as a *ValidationError
// that names the field and what was expected.
package events
