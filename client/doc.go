// Package client is foldstream's Go API for the two kinds of programs that
// talk to it, so that neither has to build subjects or JSON by hand:
//
//   - bots publish turns, notes and control events with a [Publisher]. Every
//     event is validated with the processor's own rules before it is sent (an
//     invalid event is an error naming the field, and nothing is published),
//     turns carry Nats-Msg-Id "<session>:<turn_id>" so that a re-published
//     turn is stored once, and [Publisher.PublishTurnAsync] bounds how many
//     publishes may wait for their acknowledgement.
//   - prompt builders use a [Builder] to watch a session's summary updates
//     and to ask the processor's request-reply service for a packed context
//     or a session's state; [RealtimeInstructions] puts the summary into a
//     realtime model's instructions within a hard character ceiling.
//
// The wire types are aliases of the processor's own, so a value built here
// is exactly what the processor decodes. Subjects are
// <prefix>.in.<session>.{turn,note,control} (bots),
// <prefix>.out.<session>.{summary,event} (builders) and
// <prefix>.svc.{context,session} (the service); the prefix defaults to
// "fold". See docs/builders.md.
package client
