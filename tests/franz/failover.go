package main

// `franz-probe failover`: clients that must ride out failovers of the broker
// without a restart (tests/e2e/test_failover_clients.py).
//
//	franz-probe failover [-log LEVEL] [-run-seconds N] BOOTSTRAP TOPIC STOPFILE
//
// BOOTSTRAP lists the primary and its standby (comma-separated); the test
// kills the primary, promotes the standby and brings the old primary back as
// the new standby while this runs. Until STOPFILE exists (or -run-seconds
// passed):
//
//   - an idempotent acks=all producer sends record SEQ (key and value
//     go-SEQ) to partition SEQ%2 of TOPIC and prints `acked P OFFSET SEQ` for
//     each acknowledgement;
//   - a group consumer (classic protocol, group TOPIC-group) prints
//     `consumed P OFFSET SEQ` for each record and commits every half second.
//
// Then the producer flushes (`producer-done SENT`); the consumer goes on
// until it has read every acknowledged record and the group's commits reach
// every partition's end, or drainTimeout passed, and leaves
// (`consumed-done ...`). TOPIC must exist. Timeouts are
// generous (a record may take 120 s to be delivered) so that a failover of a
// few seconds is retried, not failed; errors print as `error WHAT ...` lines
// and the clients carry on. The test checks the lines against the final log.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	failoverPartitions      = 2
	failoverOutstandingMax  = 100
	failoverSendInterval    = 5 * time.Millisecond
	failoverDeliveryTimeout = 120 * time.Second
	failoverCommitInterval  = 500 * time.Millisecond
	drainTimeout            = 30 * time.Second
	valuePrefix             = "go-"
)

// lines writes whole lines to stdout from any goroutine.
type lines struct{ mu sync.Mutex }

func (l *lines) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Printf(format+"\n", args...)
}

// seqSet is a set of sequence numbers shared by goroutines.
type seqSet struct {
	mu  sync.Mutex
	set map[int64]struct{}
}

func (s *seqSet) add(seq int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.set[seq] = struct{}{}
}

// missingFrom is how many of s's members other lacks.
func (s *seqSet) missingFrom(other *seqSet) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	other.mu.Lock()
	defer other.mu.Unlock()
	missing := 0
	for seq := range s.set {
		if _, ok := other.set[seq]; !ok {
			missing++
		}
	}
	return missing
}

type failoverRun struct {
	seeds    []string
	topic    string
	stopFile string
	deadline time.Time
	logger   kgo.Logger
	out      lines
	acked    seqSet
	consumed seqSet
	produced chan struct{} // closed when the producer has flushed
}

func runFailover(args []string) int {
	fs := flag.NewFlagSet("failover", flag.ContinueOnError)
	logLevel := fs.String("log", "warn", "client log level on stderr: none, error, warn, info, debug")
	runSeconds := fs.Int("run-seconds", 300, "stop after this long even without the stop file")
	fs.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: franz-probe failover [-log LEVEL] [-run-seconds N] BOOTSTRAP TOPIC STOPFILE")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	level, ok := logLevels[*logLevel]
	if fs.NArg() != 3 || !ok || *runSeconds <= 0 {
		fs.Usage()
		return 2
	}
	r := &failoverRun{
		seeds:    strings.Split(fs.Arg(0), ","),
		topic:    fs.Arg(1),
		stopFile: fs.Arg(2),
		deadline: time.Now().Add(time.Duration(*runSeconds) * time.Second),
		logger:   kgo.BasicLogger(os.Stderr, level, func() string { return "[franz-failover] " }),
		acked:    seqSet{set: map[int64]struct{}{}},
		consumed: seqSet{set: map[int64]struct{}{}},
		produced: make(chan struct{}),
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); r.produce() }()
	go func() { defer wg.Done(); r.consume() }()
	wg.Wait()
	r.out.printf("done")
	return 0
}

func (r *failoverRun) stopRequested() bool {
	if time.Now().After(r.deadline) {
		return true
	}
	_, err := os.Stat(r.stopFile)
	return err == nil
}

func (r *failoverRun) opts(extra ...kgo.Opt) []kgo.Opt {
	return append([]kgo.Opt{
		kgo.SeedBrokers(r.seeds...),
		kgo.ClientID("kafgres-franz-failover"),
		kgo.WithLogger(r.logger),
		// Requests other than produce and fetch (metadata, group, commit) are retried this long.
		kgo.RetryTimeout(failoverDeliveryTimeout),
	}, extra...)
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", " ") }

func (r *failoverRun) produce() {
	var seq int64
	defer close(r.produced)
	defer func() { r.out.printf("producer-done %d", seq) }()
	cl, err := kgo.NewClient(r.opts(
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(failoverDeliveryTimeout),
		kgo.ProduceRequestTimeout(15*time.Second),
		kgo.MaxBufferedRecords(failoverOutstandingMax),
		kgo.ProducerLinger(5*time.Millisecond),
	)...)
	if err != nil {
		r.out.printf("error producer %s", oneLine(err))
		return
	}
	defer cl.Close()
	for !r.stopRequested() {
		s := seq
		seq++
		value := valuePrefix + strconv.FormatInt(s, 10)
		rec := &kgo.Record{Topic: r.topic, Partition: int32(s % failoverPartitions), Key: []byte(value), Value: []byte(value)}
		// Blocks while MaxBufferedRecords are unacknowledged.
		cl.Produce(context.Background(), rec, func(rec *kgo.Record, err error) {
			if err != nil {
				r.out.printf("error produce %d %s", s, oneLine(err))
				return
			}
			r.acked.add(s)
			r.out.printf("acked %d %d %d", rec.Partition, rec.Offset, s)
		})
		time.Sleep(failoverSendInterval)
	}
	ctx, cancel := context.WithTimeout(context.Background(), failoverDeliveryTimeout+10*time.Second)
	defer cancel()
	if err := cl.Flush(ctx); err != nil {
		r.out.printf("error flush %s", oneLine(err))
	}
}

func (r *failoverRun) consume() {
	cl, err := kgo.NewClient(r.opts(
		kgo.ConsumerGroup(r.topic+"-group"),
		kgo.ConsumeTopics(r.topic),
		kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, _ map[string][]int32) {
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				r.out.printf("error commit-on-revoke %s", oneLine(err))
			}
		}),
	)...)
	if err != nil {
		r.out.printf("error consumer %s", oneLine(err))
		return
	}
	defer cl.Close() // leaves the group
	var records int64
	var drainDeadline time.Time
	nextCommit := time.Now().Add(failoverCommitInterval)
	for {
		if drainDeadline.IsZero() {
			select {
			case <-r.produced:
				drainDeadline = time.Now().Add(drainTimeout)
			default:
			}
		}
		if !drainDeadline.IsZero() && (time.Now().After(drainDeadline) ||
			(r.acked.missingFrom(&r.consumed) == 0 && r.committedToTheEnd(cl))) {
			break
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fetches := cl.PollFetches(ctx)
		cancel()
		fetches.EachError(func(topic string, partition int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				r.out.printf("error fetch %s %d %s", topic, partition, oneLine(err))
			}
		})
		fetches.EachRecord(func(rec *kgo.Record) {
			seq, err := strconv.ParseInt(strings.TrimPrefix(string(rec.Value), valuePrefix), 10, 64)
			if err != nil {
				r.out.printf("error record %d %d %q", rec.Partition, rec.Offset, rec.Value)
				return
			}
			records++
			r.consumed.add(seq)
			r.out.printf("consumed %d %d %d", rec.Partition, rec.Offset, seq)
		})
		if time.Now().After(nextCommit) {
			nextCommit = time.Now().Add(failoverCommitInterval)
			r.commit(cl, "commit")
		}
	}
	r.out.printf("consumed-done records %d distinct %d missing %d", records, len(r.consumed.set),
		r.acked.missingFrom(&r.consumed))
}

func (r *failoverRun) commit(cl *kgo.Client, what string) {
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		r.out.printf("error %s %s", what, oneLine(err))
	}
}

// committedToTheEnd commits and says whether the group's committed offsets
// reached the end of every partition of the topic: the drain's end. Having
// read every acknowledged record is not enough: after a failover a member
// rejoins and starts again from its last commit, and one still rejoining
// holds no partition (its commit commits nothing).
func (r *failoverRun) committedToTheEnd(cl *kgo.Client) bool {
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		r.out.printf("error final-commit %s", oneLine(err))
		return false
	}
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, r.topic)
	if err != nil {
		r.out.printf("error end-offsets %s", oneLine(err))
		return false
	}
	committed := cl.CommittedOffsets()[r.topic]
	atTheEnd := len(committed) >= failoverPartitions
	ends.Each(func(end kadm.ListedOffset) {
		if c, found := committed[end.Partition]; end.Err != nil || !found || c.Offset < end.Offset {
			atTheEnd = false
		}
	})
	return atTheEnd
}
