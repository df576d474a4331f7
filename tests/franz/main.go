// Command franz-probe drives a Kafka-compatible broker with franz-go (kgo and
// kadm) and prints one line per check: `ok NAME`, or `FAIL NAME: REASON`.
//
//	franz-probe [-records N] [-log LEVEL] BOOTSTRAP TOPIC
//	franz-probe failover [-log LEVEL] [-run-seconds N] BOOTSTRAP TOPIC STOPFILE
//	franz-probe secure [-ca FILE] [-cert FILE -key FILE] [-sasl MECHANISM -user NAME -password WORD] BOOTSTRAP TOPIC
//
// The second form runs clients across failovers until STOPFILE exists
// (failover.go says what it prints); the third connects, produces and
// consumes one record with TLS and SASL settings and prints what the client
// reported (secure.go). The rest of this comment is the first's.
//
// TOPIC names everything the probe creates: the topic itself (3 partitions,
// retention.ms=3600000) and the consumer group TOPIC-group. The checks run in
// order and each has its own deadline (checkTimeout); a failed check is
// reported and the run goes on, so one broker bug shows as one FAIL line.
// Records are placed by hand (record i goes to partition i%3, so its offset
// is i/3) and carry timestamp base+i s, so every expected value is exact.
//
// The client log (kgo.WithLogger) goes to stderr at -log (none, error, warn,
// info, debug; default warn). Exit status: 0 when every check passed, 1 when
// one failed, 2 on bad arguments. tests/e2e/test_franz_go.py builds and runs it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	partitionCount = 3
	retentionMs    = "3600000"
	clientID       = "kafgres-franz-probe"
	// Every check, waits included, ends within this.
	checkTimeout = 20 * time.Second
	// The balancer franz-go's group consumers use unless told otherwise.
	defaultBalancer = "cooperative-sticky"
)

type probe struct {
	bootstrap string
	topic     string
	group     string
	records   int
	baseMs    int64
	logger    kgo.Logger
	adm       *kadm.Client
	topicID   kadm.TopicID
	failed    int
}

// The -log levels.
var logLevels = map[string]kgo.LogLevel{
	"none": kgo.LogLevelNone, "error": kgo.LogLevelError, "warn": kgo.LogLevelWarn,
	"info": kgo.LogLevelInfo, "debug": kgo.LogLevelDebug,
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "failover" {
		os.Exit(runFailover(os.Args[2:])) // failover.go
	}
	if len(os.Args) > 1 && os.Args[1] == "secure" {
		os.Exit(runSecure(os.Args[2:])) // secure.go
	}
	records := flag.Int("records", 30, "records to produce (half lz4, half zstd); at least 6")
	logLevel := flag.String("log", "warn", "client log level on stderr: none, error, warn, info, debug")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: franz-probe [-records N] [-log LEVEL] BOOTSTRAP TOPIC")
		flag.PrintDefaults()
	}
	flag.Parse()
	level, ok := logLevels[*logLevel]
	if flag.NArg() != 2 || *records < 2*partitionCount || !ok {
		flag.Usage()
		os.Exit(2)
	}
	p := &probe{
		bootstrap: flag.Arg(0),
		topic:     flag.Arg(1),
		group:     flag.Arg(1) + "-group",
		records:   *records,
		// Whole seconds ten minutes ago: inside any timestamp bound a broker applies.
		baseMs: (time.Now().Unix() - 600) * 1000,
		logger: kgo.BasicLogger(os.Stderr, level, func() string { return "[franz-probe] " }),
	}
	admClient, err := kgo.NewClient(p.opts()...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "franz-probe: %v\n", err)
		os.Exit(2)
	}
	defer admClient.Close()
	p.adm = kadm.NewClient(admClient)
	p.run()
	if p.failed > 0 {
		fmt.Fprintf(os.Stderr, "franz-probe: %d check(s) failed\n", p.failed)
		os.Exit(1)
	}
}

func (p *probe) opts(extra ...kgo.Opt) []kgo.Opt {
	return append([]kgo.Opt{
		kgo.SeedBrokers(p.bootstrap),
		kgo.ClientID(clientID),
		kgo.WithLogger(p.logger),
		kgo.RetryTimeout(checkTimeout / 2),
	}, extra...)
}

// check runs fn with its own deadline and prints its verdict.
func (p *probe) check(name string, fn func(ctx context.Context) error) bool {
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	err := fn(ctx)
	if err != nil {
		p.failed++
		fmt.Printf("FAIL %s: %s\n", name, strings.ReplaceAll(err.Error(), "\n", " "))
		return false
	}
	fmt.Printf("ok %s\n", name)
	return true
}

func (p *probe) run() {
	p.check("cluster", p.checkCluster)
	if !p.check("create-topic", p.checkCreateTopic) {
		return // nothing below makes sense without the topic
	}
	p.check("create-topic-again", p.checkCreateTopicAgain)
	p.check("list-topics", p.checkListTopics)
	p.check("describe-topic-configs", p.checkDescribeTopicConfigs)

	half := p.records / 2
	p.check("produce-lz4-idempotent", func(ctx context.Context) error {
		return p.produce(ctx, kgo.Lz4Compression(), 0, half)
	})
	p.check("produce-zstd-idempotent", func(ctx context.Context) error {
		return p.produce(ctx, kgo.ZstdCompression(), half, p.records)
	})
	p.check("list-offsets", func(ctx context.Context) error { return p.checkListOffsets(ctx, half) })

	consumer, err := kgo.NewClient(p.groupOpts()...)
	if err != nil {
		p.check("consume-group", func(context.Context) error { return err })
		return
	}
	consumed := p.check("consume-group", func(ctx context.Context) error {
		return p.consume(ctx, consumer, 0, p.records)
	})
	p.check("commit", func(ctx context.Context) error { return p.commit(ctx, consumer, p.records) })
	p.check("describe-group-stable", p.checkDescribeGroupStable)
	p.check("list-groups", p.checkListGroups)
	p.check("fetch-offsets", func(ctx context.Context) error { return p.checkFetchOffsets(ctx, p.records) })
	p.check("lag", p.checkLag)
	consumer.Close() // leaves the group
	p.check("describe-group-empty", p.checkDescribeGroupEmpty)

	if consumed {
		p.check("group-resume", p.checkGroupResume)
	}
	p.check("delete-group", p.checkDeleteGroup)
	p.check("delete-topic", p.checkDeleteTopic)
}

func (p *probe) groupOpts() []kgo.Opt {
	return p.opts(
		kgo.ConsumerGroup(p.group),
		kgo.ConsumeTopics(p.topic),
		kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500*time.Millisecond),
	)
}

// --------------------------------------------------------------------------
// Cluster and topics

func (p *probe) checkCluster(ctx context.Context) error {
	host, portText, err := net.SplitHostPort(p.bootstrap)
	if err != nil {
		return err
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return err
	}
	md, err := p.adm.BrokerMetadata(ctx)
	if err != nil {
		return err
	}
	if len(md.Brokers) != 1 {
		return fmt.Errorf("brokers %v, want exactly one", md.Brokers)
	}
	b := md.Brokers[0]
	if b.Host != host || b.Port != int32(port) {
		return fmt.Errorf("broker endpoint %s:%d, want %s", b.Host, b.Port, p.bootstrap)
	}
	if md.Controller != b.NodeID {
		return fmt.Errorf("controller %d, want the one broker %d", md.Controller, b.NodeID)
	}
	if md.Cluster == "" {
		return errors.New("empty cluster id")
	}
	return nil
}

func (p *probe) checkCreateTopic(ctx context.Context) error {
	retention := retentionMs
	resps, err := p.adm.CreateTopics(ctx, partitionCount, 1, map[string]*string{"retention.ms": &retention}, p.topic)
	if err != nil {
		return err
	}
	r, err := resps.On(p.topic, nil)
	if err != nil {
		return err
	}
	if r.Err != nil {
		return fmt.Errorf("%v (%s)", r.Err, r.ErrMessage)
	}
	if r.NumPartitions != partitionCount || r.ReplicationFactor != 1 {
		return fmt.Errorf("partitions=%d replication=%d, want %d and 1", r.NumPartitions, r.ReplicationFactor, partitionCount)
	}
	if r.ID == (kadm.TopicID{}) {
		return errors.New("no topic id in the answer")
	}
	if c, ok := r.Configs["retention.ms"]; !ok || c.MaybeValue() != retentionMs {
		return fmt.Errorf("answered configs lack retention.ms=%s: %v", retentionMs, c)
	}
	p.topicID = r.ID
	return nil
}

func (p *probe) checkCreateTopicAgain(ctx context.Context) error {
	resps, err := p.adm.CreateTopics(ctx, partitionCount, 1, nil, p.topic)
	if err != nil {
		return err
	}
	r, err := resps.On(p.topic, nil)
	if err != nil {
		return err
	}
	if !errors.Is(r.Err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("error %v, want TOPIC_ALREADY_EXISTS", r.Err)
	}
	return nil
}

func (p *probe) checkListTopics(ctx context.Context) error {
	all, err := p.adm.ListTopics(ctx)
	if err != nil {
		return err
	}
	if !all.Has(p.topic) {
		return fmt.Errorf("%s not among all %d topics", p.topic, len(all))
	}
	one, err := p.adm.ListTopics(ctx, p.topic)
	if err != nil {
		return err
	}
	d, ok := one[p.topic]
	if !ok || d.Err != nil {
		return fmt.Errorf("topic not described: %v", d.Err)
	}
	if d.ID != p.topicID {
		return fmt.Errorf("topic id %v, created as %v", d.ID, p.topicID)
	}
	if d.IsInternal {
		return errors.New("topic is marked internal")
	}
	if got := d.Partitions.Numbers(); !slices.Equal(got, []int32{0, 1, 2}) {
		return fmt.Errorf("partitions %v, want [0 1 2]", got)
	}
	brokers, err := p.adm.ListBrokers(ctx)
	if err != nil {
		return err
	}
	node := []int32{brokers.NodeIDs()[0]}
	for _, pd := range d.Partitions.Sorted() {
		if pd.Err != nil || pd.Leader != node[0] || !slices.Equal(pd.Replicas, node) || !slices.Equal(pd.ISR, node) {
			return fmt.Errorf("partition %d: err=%v leader=%d replicas=%v isr=%v, want the one broker %d",
				pd.Partition, pd.Err, pd.Leader, pd.Replicas, pd.ISR, node[0])
		}
	}
	return nil
}

func (p *probe) checkDescribeTopicConfigs(ctx context.Context) error {
	rcs, err := p.adm.DescribeTopicConfigs(ctx, p.topic)
	if err != nil {
		return err
	}
	rc, err := rcs.On(p.topic, nil)
	if err != nil {
		return err
	}
	if rc.Err != nil {
		return fmt.Errorf("%v (%s)", rc.Err, rc.ErrMessage)
	}
	want := map[string]struct {
		value  string
		source kmsg.ConfigSource
	}{
		"retention.ms":   {retentionMs, kmsg.ConfigSourceDynamicTopicConfig},
		"cleanup.policy": {"delete", kmsg.ConfigSourceDefaultConfig},
	}
	for _, c := range rc.Configs {
		w, ok := want[c.Key]
		if !ok {
			continue
		}
		if c.MaybeValue() != w.value || c.Source != w.source {
			return fmt.Errorf("%s=%s source %v, want %s source %v", c.Key, c.MaybeValue(), c.Source, w.value, w.source)
		}
		delete(want, c.Key)
	}
	if len(want) > 0 {
		return fmt.Errorf("configs missing from the answer: %v", want)
	}
	return nil
}

// --------------------------------------------------------------------------
// Producing and consuming

func key(i int) string { return fmt.Sprintf("key-%03d", i) }

// value is compressible, so the codec has something to do.
func value(i int) string { return strings.Repeat(fmt.Sprintf("value-%03d;", i), 20) }

func (p *probe) record(i int) *kgo.Record {
	return &kgo.Record{
		Topic:     p.topic,
		Partition: int32(i % partitionCount),
		Key:       []byte(key(i)),
		Value:     []byte(value(i)),
		Headers:   []kgo.RecordHeader{{Key: "i", Value: []byte(strconv.Itoa(i))}},
		Timestamp: time.UnixMilli(p.baseMs + int64(i)*1000),
	}
}

// produce sends records [from, to) with a new idempotent producer (franz-go's
// default: acks=all, idempotence on) compressing with codec, and checks the
// offset of every acknowledgement.
func (p *probe) produce(ctx context.Context, codec kgo.CompressionCodec, from, to int) error {
	cl, err := kgo.NewClient(p.opts(
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(codec),
	)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	recs := make([]*kgo.Record, 0, to-from)
	for i := from; i < to; i++ {
		recs = append(recs, p.record(i))
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return err
	}
	for n, r := range recs {
		i := from + n
		if r.Partition != int32(i%partitionCount) || r.Offset != int64(i/partitionCount) {
			return fmt.Errorf("record %d acknowledged at partition %d offset %d, want %d/%d",
				i, r.Partition, r.Offset, i%partitionCount, i/partitionCount)
		}
	}
	id, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		return fmt.Errorf("producer id: %w", err)
	}
	if id < 0 || epoch != 0 {
		return fmt.Errorf("producer id %d epoch %d: not an idempotent producer", id, epoch)
	}
	return nil
}

// countBelow is how many of records [0, n) partition part holds.
func countBelow(n int, part int32) int64 {
	c := int64(0)
	for i := 0; i < n; i++ {
		if int32(i%partitionCount) == part {
			c++
		}
	}
	return c
}

func expectOffsets(what string, got kadm.ListedOffsets, err error, topic string, want func(int32) int64) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := got.Error(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for part := int32(0); part < partitionCount; part++ {
		o, ok := got.Lookup(topic, part)
		if !ok || o.Offset != want(part) {
			return fmt.Errorf("%s: partition %d offset %d (found=%v), want %d", what, part, o.Offset, ok, want(part))
		}
	}
	return nil
}

// checkListOffsets: start, end, max timestamp and by timestamp. The newest
// record of each partition is the last one of a compressed batch; Kafka 4.x
// answers max timestamp (-3) with that record's own offset. The timestamp
// asked for lies between the two producers' records, so the answer is the
// first record of a batch (where Kafgres answers by timestamp as exactly as
// Kafka; inside a compressed batch it does not, see docs/conformance.md).
func (p *probe) checkListOffsets(ctx context.Context, half int) error {
	start, err := p.adm.ListStartOffsets(ctx, p.topic)
	if err := expectOffsets("start", start, err, p.topic, func(int32) int64 { return 0 }); err != nil {
		return err
	}
	end, err := p.adm.ListEndOffsets(ctx, p.topic)
	if err := expectOffsets("end", end, err, p.topic, func(part int32) int64 { return countBelow(p.records, part) }); err != nil {
		return err
	}
	maxTs, err := p.adm.ListMaxTimestampOffsets(ctx, p.topic)
	if err := expectOffsets("max-timestamp", maxTs, err, p.topic,
		func(part int32) int64 { return countBelow(p.records, part) - 1 }); err != nil {
		return err
	}
	between := p.baseMs + int64(half)*1000 - 500
	after, err := p.adm.ListOffsetsAfterMilli(ctx, between, p.topic)
	if err := expectOffsets("after-milli", after, err, p.topic, func(part int32) int64 { return countBelow(half, part) }); err != nil {
		return err
	}
	// Past every record: kadm answers the end offset.
	late, err := p.adm.ListOffsetsAfterMilli(ctx, p.baseMs+int64(p.records)*1000, p.topic)
	return expectOffsets("after-last", late, err, p.topic, func(part int32) int64 { return countBelow(p.records, part) })
}

// consume polls until records [from, to) arrived and checks each one.
func (p *probe) consume(ctx context.Context, cl *kgo.Client, from, to int) error {
	seen := make(map[int]bool)
	for len(seen) < to-from {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("got %d of %d records before the deadline", len(seen), to-from)
		}
		for _, fe := range fetches.Errors() {
			return fmt.Errorf("fetch %s[%d]: %w", fe.Topic, fe.Partition, fe.Err)
		}
		var bad error
		fetches.EachRecord(func(r *kgo.Record) {
			if bad != nil {
				return
			}
			i, err := strconv.Atoi(headerValue(r, "i"))
			switch {
			case err != nil || i < from || i >= to:
				bad = fmt.Errorf("unexpected record at %d/%d: header i=%q", r.Partition, r.Offset, headerValue(r, "i"))
			case seen[i]:
				bad = fmt.Errorf("record %d consumed twice", i)
			case r.Topic != p.topic || r.Partition != int32(i%partitionCount) || r.Offset != int64(i/partitionCount):
				bad = fmt.Errorf("record %d at %s[%d]@%d, want partition %d offset %d",
					i, r.Topic, r.Partition, r.Offset, i%partitionCount, i/partitionCount)
			case string(r.Key) != key(i) || string(r.Value) != value(i):
				bad = fmt.Errorf("record %d: key %q or value differs", i, r.Key)
			case r.Timestamp.UnixMilli() != p.baseMs+int64(i)*1000:
				bad = fmt.Errorf("record %d: timestamp %d, want %d", i, r.Timestamp.UnixMilli(), p.baseMs+int64(i)*1000)
			case len(r.Headers) != 1:
				bad = fmt.Errorf("record %d: %d headers, want 1", i, len(r.Headers))
			}
			seen[i] = true
		})
		if bad != nil {
			return bad
		}
	}
	return nil
}

func headerValue(r *kgo.Record, k string) string {
	for _, h := range r.Headers {
		if h.Key == k {
			return string(h.Value)
		}
	}
	return ""
}

// commit commits what was polled and checks what the client holds as committed.
func (p *probe) commit(ctx context.Context, cl *kgo.Client, upTo int) error {
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		return err
	}
	committed := cl.CommittedOffsets()[p.topic]
	for part := int32(0); part < partitionCount; part++ {
		if got, want := committed[part].Offset, countBelow(upTo, part); got != want {
			return fmt.Errorf("partition %d committed %d, want %d", part, got, want)
		}
	}
	return nil
}

// --------------------------------------------------------------------------
// Groups

func (p *probe) describeGroup(ctx context.Context) (kadm.DescribedGroup, error) {
	groups, err := p.adm.DescribeGroups(ctx, p.group)
	if err != nil {
		return kadm.DescribedGroup{}, err
	}
	g, err := groups.On(p.group, nil)
	if err != nil {
		return g, err
	}
	if g.Err != nil {
		return g, fmt.Errorf("%v (%s)", g.Err, g.ErrMessage)
	}
	return g, nil
}

func (p *probe) checkDescribeGroupStable(ctx context.Context) error {
	g, err := p.describeGroup(ctx)
	if err != nil {
		return err
	}
	if g.State != "Stable" || g.ProtocolType != "consumer" || g.Protocol != defaultBalancer || len(g.Members) != 1 {
		return fmt.Errorf("state=%s protocol-type=%s protocol=%s members=%d, want Stable consumer %s 1",
			g.State, g.ProtocolType, g.Protocol, len(g.Members), defaultBalancer)
	}
	m := g.Members[0]
	if m.ClientID != clientID || m.ClientHost == "" {
		return fmt.Errorf("member client id %q host %q", m.ClientID, m.ClientHost)
	}
	joined, ok := m.Join.AsConsumer()
	if !ok || !slices.Equal(joined.Topics, []string{p.topic}) {
		return fmt.Errorf("member subscription %v (consumer=%v), want [%s]", joined, ok, p.topic)
	}
	assigned := g.AssignedPartitions().Sorted()
	if len(assigned) != 1 || assigned[0].Topic != p.topic || !slices.Equal(assigned[0].Partitions, []int32{0, 1, 2}) {
		return fmt.Errorf("assigned %v, want %s [0 1 2]", assigned, p.topic)
	}
	if g.Coordinator.Host == "" {
		return errors.New("no coordinator in the description")
	}
	return nil
}

func (p *probe) checkListGroups(ctx context.Context) error {
	groups, err := p.adm.ListGroups(ctx)
	if err != nil {
		return err
	}
	g, ok := groups[p.group]
	if !ok {
		return fmt.Errorf("%s not among %d listed groups", p.group, len(groups))
	}
	if g.ProtocolType != "consumer" || g.State != "Stable" {
		return fmt.Errorf("listed with protocol type %q state %q, want consumer Stable", g.ProtocolType, g.State)
	}
	stable, err := p.adm.ListGroups(ctx, "Stable")
	if err != nil {
		return err
	}
	empty, err := p.adm.ListGroups(ctx, "Empty")
	if err != nil {
		return err
	}
	if _, ok := stable[p.group]; !ok {
		return errors.New("not listed with the state filter Stable")
	}
	if _, ok := empty[p.group]; ok {
		return errors.New("listed with the state filter Empty")
	}
	return nil
}

func (p *probe) checkFetchOffsets(ctx context.Context, upTo int) error {
	offsets, err := p.adm.FetchOffsets(ctx, p.group)
	if err != nil {
		return err
	}
	if err := offsets.Error(); err != nil {
		return err
	}
	if n := len(offsets[p.topic]); n != partitionCount || len(offsets) != 1 {
		return fmt.Errorf("offsets for %d topics, %d partitions of ours; want 1 and %d", len(offsets), n, partitionCount)
	}
	for part := int32(0); part < partitionCount; part++ {
		o, ok := offsets.Lookup(p.topic, part)
		// franz-go commits with its member id (KIP-394: client id, dash, uuid) as the metadata.
		if !ok || o.At != countBelow(upTo, part) || !strings.HasPrefix(o.Metadata, clientID+"-") {
			return fmt.Errorf("partition %d: offset %d metadata %q (found=%v), want %d and the member id as metadata",
				part, o.At, o.Metadata, ok, countBelow(upTo, part))
		}
	}
	return nil
}

func (p *probe) checkLag(ctx context.Context) error {
	lags, err := p.adm.Lag(ctx, p.group)
	if err != nil {
		return err
	}
	l, ok := lags[p.group]
	if !ok {
		return errors.New("group missing from the answer")
	}
	if err := l.Error(); err != nil {
		return err
	}
	if total := l.Lag.Total(); total != 0 {
		return fmt.Errorf("total lag %d, want 0", total)
	}
	for part := int32(0); part < partitionCount; part++ {
		ml, ok := l.Lag[p.topic][part]
		if !ok || ml.Lag != 0 || ml.End.Offset != countBelow(p.records, part) || ml.Member == nil {
			return fmt.Errorf("partition %d: %+v (found=%v), want lag 0 at end %d with a member", part, ml, ok, countBelow(p.records, part))
		}
	}
	return nil
}

func (p *probe) checkDescribeGroupEmpty(ctx context.Context) error {
	for {
		g, err := p.describeGroup(ctx)
		if err == nil && g.State == "Empty" && len(g.Members) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("state %q with %d members, err %v; want Empty after the member left", g.State, len(g.Members), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// checkGroupResume: a new member of the group starts at the committed offsets.
func (p *probe) checkGroupResume(ctx context.Context) error {
	if err := p.produce(ctx, kgo.ZstdCompression(), p.records, p.records+partitionCount); err != nil {
		return fmt.Errorf("producing %d more: %w", partitionCount, err)
	}
	cl, err := kgo.NewClient(p.groupOpts()...)
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := p.consume(ctx, cl, p.records, p.records+partitionCount); err != nil {
		return err
	}
	return p.commit(ctx, cl, p.records+partitionCount)
}

func (p *probe) checkDeleteGroup(ctx context.Context) error {
	// The resumed member's LeaveGroup is answered before its Close returns.
	if err := p.checkDescribeGroupEmpty(ctx); err != nil {
		return err
	}
	resps, err := p.adm.DeleteGroups(ctx, p.group)
	if err != nil {
		return err
	}
	if err := resps.Error(); err != nil {
		return err
	}
	groups, err := p.adm.ListGroups(ctx)
	if err != nil {
		return err
	}
	if _, ok := groups[p.group]; ok {
		return errors.New("still listed after DeleteGroups")
	}
	offsets, err := p.adm.FetchOffsets(ctx, p.group)
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return err
	}
	if n := len(offsets[p.topic]); n != 0 {
		return fmt.Errorf("%d committed offsets left after DeleteGroups", n)
	}
	return nil
}

func (p *probe) checkDeleteTopic(ctx context.Context) error {
	resps, err := p.adm.DeleteTopics(ctx, p.topic)
	if err != nil {
		return err
	}
	if err := resps.Error(); err != nil {
		return err
	}
	all, err := p.adm.ListTopics(ctx)
	if err != nil {
		return err
	}
	if all.Has(p.topic) {
		return errors.New("still listed after DeleteTopics")
	}
	return nil
}
