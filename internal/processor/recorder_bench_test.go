package processor

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/testenv"
	"github.com/rs/zerolog"
)

// processCPU is the CPU time this process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkLifecycleEvent: one lifecycle event published by the recorder
// to an in-process server's outbound stream, until the stream holds it,
// as the recorder sends them (sent: an ack asked for once a confirmEvery)
// and with an ack asked for each (acked). The process runs the server
// too, so its CPU (or an instruction count: valgrind --tool=callgrind on
// the test binary with -test.bench LifecycleEvent/sent) is the client's
// and the server's work.
func BenchmarkLifecycleEvent(b *testing.B) {
	for _, acked := range []bool{false, true} {
		name := "sent"
		if acked {
			name = "acked"
		}
		b.Run(name, func(b *testing.B) {
			log := zerolog.Nop()
			env := testenv.New(b, testenv.Options{Log: &log})
			rec := &recorder{js: env.JS, subj: env.Layout.Subjects, clock: SystemClock{}, log: log, sent: sentEvents{log: log}}
			out, err := env.JS.Stream(context.Background(), env.Layout.Out)
			if err != nil {
				b.Fatal(err)
			}
			ids := make([]string, 1000)
			for i := range ids {
				ids[i] = fmt.Sprintf("sess-%05d", i)
			}
			b.ResetTimer()
			cpu0 := processCPU()
			for i := range b.N {
				if acked {
					rec.confirmedAt = time.Time{}
				}
				rec.event(ids[i%len(ids)], events.Lifecycle{Type: events.EventCompactionStarted, Trigger: "turn", Mode: "window"})
				if i%256 == 255 {
					rec.sent.check(time.Now())
				}
			}
			for {
				info, err := out.Info(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				if info.State.Msgs >= uint64(b.N) {
					break
				}
				time.Sleep(time.Millisecond)
			}
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N)/1e3, "cpu-us/op")
		})
	}
}
