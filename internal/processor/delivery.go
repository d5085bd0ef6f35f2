package processor

import (
	"errors"
	"strings"
	"time"
)

// delivery is what the consume loop needs of a JetStream delivery's
// metadata, read from its ack reply subject as jetstream.Msg.Metadata
// reads it, but without allocating: Metadata returns a new struct (with
// the stream, consumer and domain names) for every delivery, one
// allocation per inbound event on the hottest path.
type delivery struct {
	stream   uint64    // stream sequence
	consumer uint64    // consumer (delivery) sequence
	pending  uint64    // messages left on the consumer after this one
	stored   time.Time // when the stream stored the message
}

var errNotJSDelivery = errors.New("reply subject: expected a JetStream ack subject ($JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<timestamp>.<pending>, or with domain and account hash)")

// parseDelivery reads reply, a delivery's ack subject, in either form the
// server sends (the same rules as nats.go's GetMetadataFields):
//
//	$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<tm>.<pending>
//	$JS.ACK.<domain>.<account hash>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<tm>.<pending>[.<token>...]
func parseDelivery(reply string) (delivery, error) {
	const prefix = "$JS.ACK."
	n := strings.Count(reply, ".") + 1
	// v1 has exactly 9 tokens; v2 at least 11 (the 12th may go away).
	if n < 9 || (n > 9 && n < 11) || !strings.HasPrefix(reply, prefix) {
		return delivery{}, errNotJSDelivery
	}
	rest := reply[len(prefix):]
	skip := 2 // stream, consumer
	if n > 9 {
		skip = 4 // domain, account hash, stream, consumer
	}
	for range skip {
		_, rest, _ = strings.Cut(rest, ".")
	}
	var num [5]uint64 // delivered, sseq, cseq, tm, pending
	for i := range num {
		var tok string
		tok, rest, _ = strings.Cut(rest, ".")
		num[i] = parseNum(tok)
	}
	return delivery{stream: num[1], consumer: num[2], stored: time.Unix(0, int64(num[3])), pending: num[4]}, nil
}

// parseNum is nats.go's ParseNum: a decimal token, 0 if it is not one.
func parseNum(d string) (n uint64) {
	for i := 0; i < len(d); i++ {
		c := d[i]
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + uint64(c-'0')
	}
	return n
}
