// Command sarama-probe drives a Kafka-compatible broker with Sarama
// (github.com/IBM/sarama: ClusterAdmin, SyncProducer, ConsumerGroup and
// Consumer) and prints one line per check: `ok NAME`, or `FAIL NAME: REASON`.
//
//	sarama-probe [-records N] [-log LEVEL] BOOTSTRAP TOPIC
//
// The checks run in two passes. The first sets config.Version to
// sarama.MaxVersion (Kafka 4.3.1, the newest Sarama knows), so every request
// goes at the newest version both sides serve (Sarama takes the lower of its
// own and the broker's ApiVersions maximum). The second, whose checks are
// named old-*, runs a subset with config.Version = V2_1_0_0, the oldest Kafka
// that Apache Kafka 4 still serves (KIP-896), so the same work goes out with
// old, non-flexible request versions (Metadata v7, Produce v7, Fetch v10,
// JoinGroup v3, OffsetCommit v6, InitProducerId v1, EndTxn v1…).
//
// TOPIC (TOPIC-old in the second pass) names everything a pass creates: the
// topic itself (3 partitions, retention.ms=3600000), the consumer group
// TOPIC-group, the transactions' topic TOPIC-txn (1 partition), the
// transactional id TOPIC-txn and the group TOPIC-txn-group whose offsets a
// transaction commits. The checks run in order and each has its own deadline
// (checkTimeout; Sarama's calls take no context, so a call still stuck then
// is abandoned); a failed check is reported and the run goes on, so one
// broker bug shows as one FAIL line. Records are placed by hand (record i goes
// to partition i%3, so its offset is i/3) and carry timestamp base+i s, so
// every expected value is exact.
//
// Sarama's log (sarama.Logger) goes to stderr at -log info (the default),
// with its protocol-level debug log (sarama.DebugLogger) too at -log debug,
// and nowhere at -log none. Exit status: 0 when every check passed, 1 when one
// failed, 2 on bad arguments. tests/e2e/test_sarama.py builds and runs it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

const (
	partitionCount = 3
	retentionMs    = "3600000"
	clientID       = "kafgres-sarama-probe"
	// Every check, waits included, ends within this; the work inside it gets
	// a second less, so that it can say what it was waiting for.
	checkTimeout = 20 * time.Second
	// The balancer Sarama's group consumers use unless told otherwise.
	defaultBalancer = "range"
	// What the group consumers commit with every offset.
	commitMetadata = "sarama-probe"
	// Records per transaction.
	txnRecords = 4
)

// A pass: one config.Version and the names it creates.
type pass struct {
	prefix  string // of its check names: "" or "old-"
	version sarama.KafkaVersion
	codec   sarama.CompressionCodec
	full    bool // every check, or the old-version subset
	// The Metadata version Sarama sends for version (its newest, 11, or v7 for Kafka 2.1).
	metadataVersion int16
	topic           string
	group           string
	txnTopic        string
	txnID           string
	txnGroup        string
	adm             sarama.ClusterAdmin
	topicUUID       sarama.Uuid
}

type probe struct {
	bootstrap string
	records   int
	baseMs    int64
	failed    int
}

func main() {
	records := flag.Int("records", 30, "records to produce in each pass; at least 6")
	logLevel := flag.String("log", "info", "Sarama's log on stderr: none, info, debug")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: sarama-probe [-records N] [-log LEVEL] BOOTSTRAP TOPIC")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 2 || *records < 2*partitionCount || !slices.Contains([]string{"none", "info", "debug"}, *logLevel) {
		flag.Usage()
		os.Exit(2)
	}
	if *logLevel != "none" {
		sarama.Logger = log.New(os.Stderr, "[sarama] ", log.LstdFlags|log.Lmicroseconds)
	}
	if *logLevel == "debug" {
		sarama.DebugLogger = log.New(os.Stderr, "[sarama debug] ", log.LstdFlags|log.Lmicroseconds)
	} else {
		sarama.DebugLogger = log.New(io.Discard, "", 0)
	}
	p := &probe{
		bootstrap: flag.Arg(0),
		records:   *records,
		// Whole seconds ten minutes ago: inside any timestamp bound a broker applies.
		baseMs: (time.Now().Unix() - 600) * 1000,
	}
	topic := flag.Arg(1)
	p.run(newPass("", sarama.MaxVersion, 11, sarama.CompressionZSTD, true, topic))
	p.run(newPass("old-", sarama.V2_1_0_0, 7, sarama.CompressionSnappy, false, topic+"-old"))
	if p.failed > 0 {
		fmt.Fprintf(os.Stderr, "sarama-probe: %d check(s) failed\n", p.failed)
		os.Exit(1)
	}
}

func newPass(prefix string, version sarama.KafkaVersion, metadataVersion int16, codec sarama.CompressionCodec, full bool, topic string) *pass {
	return &pass{
		prefix: prefix, version: version, metadataVersion: metadataVersion, codec: codec, full: full,
		topic: topic, group: topic + "-group",
		txnTopic: topic + "-txn", txnID: topic + "-txn", txnGroup: topic + "-txn-group",
	}
}

// config is what every client of a pass starts from: bounded waits and
// retries everywhere, so that a call ends within a check's deadline.
func (ps *pass) config() *sarama.Config {
	c := sarama.NewConfig()
	c.Version = ps.version
	c.ClientID = clientID
	c.Net.DialTimeout = 5 * time.Second
	c.Net.ReadTimeout = 10 * time.Second
	c.Net.WriteTimeout = 10 * time.Second
	c.Metadata.Retry.Max = 5
	c.Metadata.Retry.Backoff = 200 * time.Millisecond
	// A lookup never creates a topic: a missing one is an error.
	c.Metadata.AllowAutoTopicCreation = false
	c.Admin.Timeout = 10 * time.Second
	c.Admin.Retry.Max = 5
	c.Admin.Retry.Backoff = 200 * time.Millisecond
	return c
}

// producerConfig: acks=all, idempotent (so one request in flight), the
// pass's codec, records placed by hand; with txnID, transactional too.
func (ps *pass) producerConfig(txnID string) *sarama.Config {
	c := ps.config()
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Idempotent = true
	c.Net.MaxOpenRequests = 1
	c.Producer.Compression = ps.codec
	c.Producer.Partitioner = sarama.NewManualPartitioner
	c.Producer.Return.Successes = true
	c.Producer.Return.Errors = true
	c.Producer.Retry.Max = 5
	c.Producer.Retry.Backoff = 200 * time.Millisecond
	c.Producer.Timeout = 10 * time.Second
	if txnID != "" {
		c.Producer.Transaction.ID = txnID
		c.Producer.Transaction.Timeout = 30 * time.Second
		c.Producer.Transaction.Retry.Max = 20
		c.Producer.Transaction.Retry.Backoff = 200 * time.Millisecond
	}
	return c
}

func (ps *pass) consumerConfig(isolation sarama.IsolationLevel) *sarama.Config {
	c := ps.config()
	c.Consumer.Return.Errors = true
	c.Consumer.MaxWaitTime = 500 * time.Millisecond
	c.Consumer.IsolationLevel = isolation
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Offsets.AutoCommit.Enable = false
	c.Consumer.Group.Session.Timeout = 10 * time.Second
	c.Consumer.Group.Heartbeat.Interval = 1 * time.Second
	c.Consumer.Group.Rebalance.Timeout = 10 * time.Second
	c.Consumer.Group.Rebalance.Retry.Max = 4
	c.Consumer.Group.Rebalance.Retry.Backoff = 500 * time.Millisecond
	return c
}

// check runs fn with its own deadline and prints its verdict.
func (p *probe) check(ps *pass, name string, fn func(ctx context.Context) error) bool {
	name = ps.prefix + name
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout-time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	var err error
	select {
	case err = <-done:
	case <-time.After(checkTimeout):
		err = fmt.Errorf("did not finish within %v (a Sarama call did not return)", checkTimeout)
	}
	if err != nil {
		p.failed++
		fmt.Printf("FAIL %s: %s\n", name, strings.ReplaceAll(err.Error(), "\n", " "))
		return false
	}
	fmt.Printf("ok %s\n", name)
	return true
}

func (p *probe) run(ps *pass) {
	adm, err := sarama.NewClusterAdmin([]string{p.bootstrap}, ps.config())
	if err != nil {
		p.check(ps, "cluster", func(context.Context) error { return fmt.Errorf("admin client: %w", err) })
		return
	}
	defer adm.Close()
	ps.adm = adm
	p.check(ps, "cluster", p.checkCluster(ps))
	if !p.check(ps, "create-topic", p.checkCreateTopic(ps)) {
		return // nothing below makes sense without the topic
	}
	if ps.full {
		p.check(ps, "create-topic-again", p.checkCreateTopicAgain(ps))
	}
	p.check(ps, "produce-idempotent", func(context.Context) error { return p.produce(ps, 0, p.records) })
	if ps.full {
		p.check(ps, "end-offsets", p.checkEndOffsets(ps))
	}

	g := &groupMember{}
	consumed := p.check(ps, "consume-group", func(ctx context.Context) error {
		if err := g.start(p, ps); err != nil {
			return err
		}
		return g.consume(ctx, p, ps, 0, p.records)
	})
	p.check(ps, "commit", func(ctx context.Context) error { return g.commit(ctx, p, ps, p.records) })
	p.check(ps, "describe-group-stable", p.checkDescribeGroupStable(ps))
	if ps.full {
		p.check(ps, "list-groups", p.checkListGroups(ps))
	}
	p.check(ps, "fetch-offsets", func(context.Context) error { return p.checkFetchOffsets(ps, p.records) })
	leave := func(ctx context.Context) error {
		if err := g.close(); err != nil {
			return fmt.Errorf("closing the group consumer: %w", err)
		}
		return waitGroupEmpty(ctx, ps)
	}
	p.check(ps, "describe-group-empty", leave)
	if ps.full && consumed {
		p.check(ps, "group-resume", p.checkGroupResume(ps))
	}

	if p.check(ps, "txn-commit", p.checkTxnCommit(ps)) {
		if p.check(ps, "txn-abort", p.checkTxnAbort(ps)) {
			p.check(ps, "txn-read-committed", p.checkTxnRead(ps, sarama.ReadCommitted))
			if ps.full {
				p.check(ps, "txn-read-uncommitted", p.checkTxnRead(ps, sarama.ReadUncommitted))
			}
		}
		if ps.full {
			p.check(ps, "txn-offsets", p.checkTxnOffsets(ps))
		}
	}
	p.check(ps, "delete-group", p.checkDeleteGroup(ps))
	p.check(ps, "delete-topic", p.checkDeleteTopic(ps))
}

// --------------------------------------------------------------------------
// Cluster and topics

func (p *probe) checkCluster(ps *pass) func(context.Context) error {
	return func(context.Context) error {
		host, portText, err := net.SplitHostPort(p.bootstrap)
		if err != nil {
			return err
		}
		if _, err := strconv.Atoi(portText); err != nil {
			return err
		}
		brokers, controller, err := ps.adm.DescribeCluster()
		if err != nil {
			return fmt.Errorf("describe cluster: %w", err)
		}
		if len(brokers) != 1 {
			return fmt.Errorf("%d brokers, want exactly one", len(brokers))
		}
		b := brokers[0]
		if b.Addr() != net.JoinHostPort(host, portText) {
			return fmt.Errorf("broker endpoint %s, want %s", b.Addr(), p.bootstrap)
		}
		if controller != b.ID() {
			return fmt.Errorf("controller %d, want the one broker %d", controller, b.ID())
		}
		ctrl, err := ps.adm.Controller()
		if err != nil {
			return fmt.Errorf("controller: %w", err)
		}
		// Sarama sends an empty topic list as null: every topic.
		md, err := ctrl.GetMetadata(sarama.NewMetadataRequest(ps.version, nil))
		if err != nil {
			return fmt.Errorf("metadata: %w", err)
		}
		// The version negotiated shows which pass this is.
		if md.Version != ps.metadataVersion {
			return fmt.Errorf("Metadata v%d, want v%d for config.Version %v", md.Version, ps.metadataVersion, ps.version)
		}
		if md.ClusterID == nil || *md.ClusterID == "" {
			return fmt.Errorf("no cluster id in Metadata v%d", md.Version)
		}
		if md.ControllerID != b.ID() || len(md.Brokers) != 1 || md.Brokers[0].ID() != b.ID() {
			return fmt.Errorf("Metadata v%d: controller %d, %d brokers; want the one broker %d", md.Version, md.ControllerID, len(md.Brokers), b.ID())
		}
		return nil
	}
}

func (p *probe) checkCreateTopic(ps *pass) func(context.Context) error {
	return func(ctx context.Context) error {
		retention := retentionMs
		err := ps.adm.CreateTopic(ps.topic, &sarama.TopicDetail{
			NumPartitions: partitionCount, ReplicationFactor: 1,
			ConfigEntries: map[string]*string{"retention.ms": &retention},
		}, false)
		if err != nil {
			return fmt.Errorf("create: %w", err)
		}
		md, err := waitTopic(ctx, ps, ps.topic, partitionCount)
		if err != nil {
			return err
		}
		if md.IsInternal {
			return errors.New("topic is marked internal")
		}
		// Topic ids came with Metadata v10.
		if md.Version >= 10 {
			if md.Uuid == (sarama.Uuid{}) {
				return fmt.Errorf("no topic id in Metadata v%d", md.Version)
			}
			ps.topicUUID = md.Uuid
		}
		entries, err := ps.adm.DescribeConfig(sarama.ConfigResource{
			Type: sarama.TopicResource, Name: ps.topic, ConfigNames: []string{"retention.ms", "cleanup.policy"},
		})
		if err != nil {
			return fmt.Errorf("describe configs: %w", err)
		}
		want := map[string]struct {
			value  string
			source sarama.ConfigSource
		}{
			"retention.ms":   {retentionMs, sarama.SourceTopic},
			"cleanup.policy": {"delete", sarama.SourceDefault},
		}
		for _, e := range entries {
			w, ok := want[e.Name]
			if !ok {
				return fmt.Errorf("config %s answered, not asked for", e.Name)
			}
			if e.Value != w.value || e.Source != w.source {
				return fmt.Errorf("%s=%s source %v, want %s source %v", e.Name, e.Value, e.Source, w.value, w.source)
			}
			delete(want, e.Name)
		}
		if len(want) > 0 {
			return fmt.Errorf("configs missing from the answer: %v", want)
		}
		return nil
	}
}

// waitTopic polls Metadata until topic has partitions 0..n-1, each led by the
// one broker with itself as the only replica.
func waitTopic(ctx context.Context, ps *pass, topic string, n int) (*sarama.TopicMetadata, error) {
	brokers, _, err := ps.adm.DescribeCluster()
	if err != nil || len(brokers) != 1 {
		return nil, fmt.Errorf("describe cluster: %d brokers, %v", len(brokers), err)
	}
	node := []int32{brokers[0].ID()}
	last := errors.New("no answer")
	for {
		mds, err := ps.adm.DescribeTopics([]string{topic})
		switch {
		case err != nil:
			last = err
		case len(mds) != 1 || mds[0].Name != topic:
			last = fmt.Errorf("%d topics answered", len(mds))
		case mds[0].Err != sarama.ErrNoError:
			last = mds[0].Err
		case len(mds[0].Partitions) != n:
			last = fmt.Errorf("%d partitions, want %d", len(mds[0].Partitions), n)
		default:
			parts := slices.Clone(mds[0].Partitions)
			slices.SortFunc(parts, func(a, b *sarama.PartitionMetadata) int { return int(a.ID - b.ID) })
			last = nil
			for i, pm := range parts {
				if pm.ID != int32(i) || pm.Err != sarama.ErrNoError || pm.Leader != node[0] ||
					!slices.Equal(pm.Replicas, node) || !slices.Equal(pm.Isr, node) {
					last = fmt.Errorf("partition %d: err=%v leader=%d replicas=%v isr=%v, want the one broker %d",
						pm.ID, pm.Err, pm.Leader, pm.Replicas, pm.Isr, node[0])
					break
				}
			}
			if last == nil {
				return mds[0], nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("topic %s not ready: %w", topic, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (p *probe) checkCreateTopicAgain(ps *pass) func(context.Context) error {
	return func(context.Context) error {
		err := ps.adm.CreateTopic(ps.topic, &sarama.TopicDetail{NumPartitions: partitionCount, ReplicationFactor: 1}, false)
		if !errors.Is(err, sarama.ErrTopicAlreadyExists) {
			return fmt.Errorf("error %v, want TOPIC_ALREADY_EXISTS", err)
		}
		return nil
	}
}

// --------------------------------------------------------------------------
// Producing and consuming

func key(i int) string { return fmt.Sprintf("key-%03d", i) }

// value is compressible, so the codec has something to do.
func value(i int) string { return strings.Repeat(fmt.Sprintf("value-%03d;", i), 20) }

func (p *probe) message(topic string, partition int32, i int) *sarama.ProducerMessage {
	return &sarama.ProducerMessage{
		Topic:     topic,
		Partition: partition,
		Key:       sarama.StringEncoder(key(i)),
		Value:     sarama.StringEncoder(value(i)),
		Headers:   []sarama.RecordHeader{{Key: []byte("i"), Value: []byte(strconv.Itoa(i))}},
		Timestamp: time.UnixMilli(p.baseMs + int64(i)*1000),
	}
}

// produce sends records [from, to) to the pass's topic with a new idempotent
// SyncProducer and checks where each was acknowledged.
func (p *probe) produce(ps *pass, from, to int) error {
	prod, err := sarama.NewSyncProducer([]string{p.bootstrap}, ps.producerConfig(""))
	if err != nil {
		return fmt.Errorf("producer: %w", err)
	}
	msgs := make([]*sarama.ProducerMessage, 0, to-from)
	for i := from; i < to; i++ {
		msgs = append(msgs, p.message(ps.topic, int32(i%partitionCount), i))
	}
	if err := prod.SendMessages(msgs); err != nil {
		prod.Close()
		return err
	}
	for n, m := range msgs {
		i := from + n
		if m.Partition != int32(i%partitionCount) || m.Offset != int64(i/partitionCount) {
			prod.Close()
			return fmt.Errorf("record %d acknowledged at partition %d offset %d, want %d/%d",
				i, m.Partition, m.Offset, i%partitionCount, i/partitionCount)
		}
	}
	return prod.Close()
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

// checkEndOffsets: ListOffsets for the earliest and the latest offset.
func (p *probe) checkEndOffsets(ps *pass) func(context.Context) error {
	return func(context.Context) error {
		cl, err := sarama.NewClient([]string{p.bootstrap}, ps.config())
		if err != nil {
			return err
		}
		defer cl.Close()
		for part := int32(0); part < partitionCount; part++ {
			oldest, err := cl.GetOffset(ps.topic, part, sarama.OffsetOldest)
			if err != nil {
				return fmt.Errorf("partition %d earliest: %w", part, err)
			}
			newest, err := cl.GetOffset(ps.topic, part, sarama.OffsetNewest)
			if err != nil {
				return fmt.Errorf("partition %d latest: %w", part, err)
			}
			if oldest != 0 || newest != countBelow(p.records, part) {
				return fmt.Errorf("partition %d: offsets %d..%d, want 0..%d", part, oldest, newest, countBelow(p.records, part))
			}
		}
		return nil
	}
}

// checkRecord says what is wrong with m, which should be record i of topic
// at partition/offset, or nil.
func (p *probe) checkRecord(m *sarama.ConsumerMessage, topic string, i int, partition int32, offset int64) error {
	switch {
	case m.Topic != topic || m.Partition != partition || m.Offset != offset:
		return fmt.Errorf("record %d at %s[%d]@%d, want %s[%d]@%d", i, m.Topic, m.Partition, m.Offset, topic, partition, offset)
	case string(m.Key) != key(i) || string(m.Value) != value(i):
		return fmt.Errorf("record %d: key %q or value differs", i, m.Key)
	case m.Timestamp.UnixMilli() != p.baseMs+int64(i)*1000:
		return fmt.Errorf("record %d: timestamp %d, want %d", i, m.Timestamp.UnixMilli(), p.baseMs+int64(i)*1000)
	case len(m.Headers) != 1:
		return fmt.Errorf("record %d: %d headers, want 1", i, len(m.Headers))
	}
	return nil
}

func headerIndex(m *sarama.ConsumerMessage) (int, error) {
	for _, h := range m.Headers {
		if string(h.Key) == "i" {
			return strconv.Atoi(string(h.Value))
		}
	}
	return 0, fmt.Errorf("record at %s[%d]@%d has no header i", m.Topic, m.Partition, m.Offset)
}

// --------------------------------------------------------------------------
// Groups

// groupMember is one member of the pass's group: a ConsumerGroup whose
// Consume loop runs in the background and hands every record over.
type groupMember struct {
	cg       sarama.ConsumerGroup
	cancel   context.CancelFunc
	loopDone chan struct{}
	records  chan *sarama.ConsumerMessage

	mu      sync.Mutex
	session sarama.ConsumerGroupSession
	errs    []string
}

func (g *groupMember) Setup(s sarama.ConsumerGroupSession) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.session = s
	return nil
}

func (g *groupMember) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (g *groupMember) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		select {
		case g.records <- m:
		case <-s.Context().Done():
			return nil
		}
	}
	return nil
}

func (g *groupMember) noteError(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.errs = append(g.errs, err.Error())
}

func (g *groupMember) errors() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.errs)
}

func (g *groupMember) currentSession() sarama.ConsumerGroupSession {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.session
}

// start joins the group and consumes in the background until close.
func (g *groupMember) start(p *probe, ps *pass) error {
	cg, err := sarama.NewConsumerGroup([]string{p.bootstrap}, ps.group, ps.consumerConfig(sarama.ReadUncommitted))
	if err != nil {
		return fmt.Errorf("consumer group: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.cg, g.cancel = cg, cancel
	g.loopDone = make(chan struct{})
	g.records = make(chan *sarama.ConsumerMessage, 4*p.records)
	go func() {
		for err := range cg.Errors() {
			g.noteError(err)
		}
	}()
	go func() {
		defer close(g.loopDone)
		for ctx.Err() == nil {
			// Consume returns at each rebalance; the loop joins again.
			if err := cg.Consume(ctx, []string{ps.topic}, g); err != nil {
				if errors.Is(err, sarama.ErrClosedConsumerGroup) {
					return
				}
				g.noteError(err)
				select {
				case <-ctx.Done():
				case <-time.After(200 * time.Millisecond):
				}
			}
		}
	}()
	return nil
}

// consume waits until records [from, to) arrived, checks each one and
// marks it as consumed.
func (g *groupMember) consume(ctx context.Context, p *probe, ps *pass, from, to int) error {
	seen := make(map[int]bool)
	for len(seen) < to-from {
		var m *sarama.ConsumerMessage
		select {
		case m = <-g.records:
		case <-ctx.Done():
			return fmt.Errorf("got %d of %d records before the deadline; client errors: %v", len(seen), to-from, g.errors())
		}
		i, err := headerIndex(m)
		switch {
		case err != nil:
			return err
		case i < from || i >= to:
			return fmt.Errorf("unexpected record %d at %d/%d", i, m.Partition, m.Offset)
		case seen[i]:
			return fmt.Errorf("record %d consumed twice", i)
		}
		if err := p.checkRecord(m, ps.topic, i, int32(i%partitionCount), int64(i/partitionCount)); err != nil {
			return err
		}
		seen[i] = true
		s := g.currentSession()
		if s == nil {
			return errors.New("a record came before the session's Setup")
		}
		s.MarkMessage(m, commitMetadata)
	}
	return nil
}

// commit commits what was marked and checks what the group then holds.
func (g *groupMember) commit(ctx context.Context, p *probe, ps *pass, upTo int) error {
	s := g.currentSession()
	if s == nil {
		return errors.New("no group session")
	}
	before := len(g.errors())
	s.Commit() // synchronous; its errors go to the group's Errors channel
	if errs := g.errors(); len(errs) > before {
		return fmt.Errorf("commit: %v", errs[before:])
	}
	partitions := []int32{0, 1, 2}
	resp, err := ps.adm.ListConsumerGroupOffsets(ps.group, map[string][]int32{ps.topic: partitions})
	if err != nil {
		return fmt.Errorf("fetching the commit: %w", err)
	}
	for _, part := range partitions {
		b := resp.GetBlock(ps.topic, part)
		if b == nil || b.Err != sarama.ErrNoError || b.Offset != countBelow(upTo, part) {
			return fmt.Errorf("partition %d committed %+v, want offset %d", part, b, countBelow(upTo, part))
		}
	}
	return nil
}

// close leaves the group (LeaveGroup) and waits for the Consume loop.
func (g *groupMember) close() error {
	if g.cg == nil {
		return errors.New("never started")
	}
	g.cancel()
	err := g.cg.Close()
	<-g.loopDone
	return err
}

func describeGroup(ps *pass, group string) (*sarama.GroupDescription, error) {
	gds, err := ps.adm.DescribeConsumerGroups([]string{group})
	if err != nil {
		return nil, err
	}
	if len(gds) != 1 || gds[0].GroupId != group {
		return nil, fmt.Errorf("%d groups described", len(gds))
	}
	if gds[0].Err != sarama.ErrNoError {
		return nil, gds[0].Err
	}
	return gds[0], nil
}

func (p *probe) checkDescribeGroupStable(ps *pass) func(context.Context) error {
	return func(context.Context) error {
		g, err := describeGroup(ps, ps.group)
		if err != nil {
			return err
		}
		if g.State != "Stable" || g.ProtocolType != "consumer" || g.Protocol != defaultBalancer || len(g.Members) != 1 {
			return fmt.Errorf("state=%s protocol-type=%s protocol=%s members=%d, want Stable consumer %s 1",
				g.State, g.ProtocolType, g.Protocol, len(g.Members), defaultBalancer)
		}
		for id, m := range g.Members {
			if m.MemberId != id || m.ClientId != clientID || m.ClientHost == "" {
				return fmt.Errorf("member %q: id %q client id %q host %q", id, m.MemberId, m.ClientId, m.ClientHost)
			}
			meta, err := m.GetMemberMetadata()
			if err != nil || meta == nil || !slices.Equal(meta.Topics, []string{ps.topic}) {
				return fmt.Errorf("member subscription %+v (%v), want [%s]", meta, err, ps.topic)
			}
			assigned, err := m.GetMemberAssignment()
			if err != nil || assigned == nil || len(assigned.Topics) != 1 {
				return fmt.Errorf("member assignment %+v (%v), want %s [0 1 2]", assigned, err, ps.topic)
			}
			parts := slices.Sorted(slices.Values(assigned.Topics[ps.topic]))
			if !slices.Equal(parts, []int32{0, 1, 2}) {
				return fmt.Errorf("assigned %v, want %s [0 1 2]", assigned.Topics, ps.topic)
			}
		}
		return nil
	}
}

func (p *probe) checkListGroups(ps *pass) func(context.Context) error {
	return func(context.Context) error {
		groups, err := ps.adm.ListConsumerGroups()
		if err != nil {
			return err
		}
		protocolType, ok := groups[ps.group]
		if !ok {
			return fmt.Errorf("%s not among %d listed groups", ps.group, len(groups))
		}
		if protocolType != "consumer" {
			return fmt.Errorf("listed with protocol type %q, want consumer", protocolType)
		}
		return nil
	}
}

// offsetBlocks is every committed offset of an OffsetFetch answer, at any version.
func offsetBlocks(resp *sarama.OffsetFetchResponse, group string) (map[string]map[int32]*sarama.OffsetFetchResponseBlock, error) {
	if resp.Version < 8 {
		return resp.Blocks, nil
	}
	g := resp.GetGroup(group)
	if g == nil {
		return nil, fmt.Errorf("group %s not in the OffsetFetch v%d answer", group, resp.Version)
	}
	return g.Blocks, nil
}

// checkFetchOffsets: OffsetFetch for all the group's topics.
func (p *probe) checkFetchOffsets(ps *pass, upTo int) error {
	resp, err := ps.adm.ListConsumerGroupOffsets(ps.group, nil)
	if err != nil {
		return err
	}
	blocks, err := offsetBlocks(resp, ps.group)
	if err != nil {
		return err
	}
	if n := len(blocks[ps.topic]); n != partitionCount || len(blocks) != 1 {
		return fmt.Errorf("OffsetFetch v%d: offsets for %d topics, %d partitions of ours; want 1 and %d",
			resp.Version, len(blocks), n, partitionCount)
	}
	for part := int32(0); part < partitionCount; part++ {
		b := blocks[ps.topic][part]
		if b == nil || b.Err != sarama.ErrNoError || b.Offset != countBelow(upTo, part) || b.Metadata != commitMetadata {
			return fmt.Errorf("partition %d: %+v, want offset %d metadata %q", part, b, countBelow(upTo, part), commitMetadata)
		}
	}
	return nil
}

func waitGroupEmpty(ctx context.Context, ps *pass) error {
	for {
		g, err := describeGroup(ps, ps.group)
		if err == nil && g.State == "Empty" && len(g.Members) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			if g == nil {
				return fmt.Errorf("no description (%v); want Empty after the member left", err)
			}
			return fmt.Errorf("state %q with %d members, err %v; want Empty after the member left", g.State, len(g.Members), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// checkGroupResume: a new member of the group starts at the committed offsets.
func (p *probe) checkGroupResume(ps *pass) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := p.produce(ps, p.records, p.records+partitionCount); err != nil {
			return fmt.Errorf("producing %d more: %w", partitionCount, err)
		}
		g := &groupMember{}
		if err := g.start(p, ps); err != nil {
			return err
		}
		err := g.consume(ctx, p, ps, p.records, p.records+partitionCount)
		if err == nil {
			err = g.commit(ctx, p, ps, p.records+partitionCount)
		}
		if cerr := g.close(); err == nil && cerr != nil {
			err = fmt.Errorf("closing the group consumer: %w", cerr)
		}
		return err
	}
}

// --------------------------------------------------------------------------
// Transactions
//
// The transactions' topic has one partition and takes txnRecords records per
// transaction, each followed by its control record (the commit or abort
// marker): the records of transaction k are numbers k*txnRecords+j at
// offsets k*(txnRecords+1)+j. Transactions 0, 2 and 3 commit, 1 aborts.

const txnAborted = 1

func txnOffset(i int) int64 { return int64(i/txnRecords*(txnRecords+1) + i%txnRecords) }

func (p *probe) txnProducer(ps *pass) (sarama.SyncProducer, error) {
	prod, err := sarama.NewSyncProducer([]string{p.bootstrap}, ps.producerConfig(ps.txnID))
	if err != nil {
		return nil, fmt.Errorf("transactional producer: %w", err)
	}
	if !prod.IsTransactional() {
		prod.Close()
		return nil, errors.New("the producer is not transactional")
	}
	return prod, nil
}

// sendTxn runs transaction k: its records, offsets to commit with it (if
// any), then a commit or (abort) an abort.
func (p *probe) sendTxn(ps *pass, prod sarama.SyncProducer, k int, offsets map[string][]*sarama.PartitionOffsetMetadata, abort bool) error {
	if err := prod.BeginTxn(); err != nil {
		return fmt.Errorf("transaction %d: begin: %w", k, err)
	}
	msgs := make([]*sarama.ProducerMessage, 0, txnRecords)
	for i := k * txnRecords; i < (k+1)*txnRecords; i++ {
		msgs = append(msgs, p.message(ps.txnTopic, 0, i))
	}
	if err := prod.SendMessages(msgs); err != nil {
		return fmt.Errorf("transaction %d: send: %w", k, err)
	}
	for n, m := range msgs {
		i := k*txnRecords + n
		if m.Partition != 0 || m.Offset != txnOffset(i) {
			return fmt.Errorf("transaction %d: record %d acknowledged at %d/%d, want 0/%d", k, i, m.Partition, m.Offset, txnOffset(i))
		}
	}
	if offsets != nil {
		if err := prod.AddOffsetsToTxn(offsets, ps.txnGroup); err != nil {
			return fmt.Errorf("transaction %d: add offsets: %w", k, err)
		}
	}
	end, verb := prod.CommitTxn, "commit"
	if abort {
		end, verb = prod.AbortTxn, "abort"
	}
	if err := end(); err != nil {
		return fmt.Errorf("transaction %d: %s: %w (status %v)", k, verb, err, prod.TxnStatus())
	}
	if st := prod.TxnStatus(); st&sarama.ProducerTxnFlagReady == 0 || st&sarama.ProducerTxnFlagInError != 0 {
		return fmt.Errorf("transaction %d: status %v after the %s, want ready", k, st, verb)
	}
	return nil
}

// checkTxnCommit creates the transactions' topic and commits transaction 0.
func (p *probe) checkTxnCommit(ps *pass) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := ps.adm.CreateTopic(ps.txnTopic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
			return fmt.Errorf("create %s: %w", ps.txnTopic, err)
		}
		if _, err := waitTopic(ctx, ps, ps.txnTopic, 1); err != nil {
			return err
		}
		prod, err := p.txnProducer(ps)
		if err != nil {
			return err
		}
		defer prod.Close()
		return p.sendTxn(ps, prod, 0, nil, false)
	}
}

// checkTxnAbort aborts transaction 1 and commits 2, with a new producer
// (InitProducerId again, for the same transactional id).
func (p *probe) checkTxnAbort(ps *pass) func(context.Context) error {
	return func(context.Context) error {
		prod, err := p.txnProducer(ps)
		if err != nil {
			return err
		}
		defer prod.Close()
		if err := p.sendTxn(ps, prod, txnAborted, nil, true); err != nil {
			return err
		}
		return p.sendTxn(ps, prod, 2, nil, false)
	}
}

// checkTxnRead reads the transactions' topic from the start: read_committed
// sees exactly transactions 0 and 2, read_uncommitted 0, 1 and 2, in order
// at their offsets; both stop before what txn-offsets adds later.
func (p *probe) checkTxnRead(ps *pass, isolation sarama.IsolationLevel) func(context.Context) error {
	return func(ctx context.Context) error {
		var want []int
		for i := 0; i < 3*txnRecords; i++ {
			if isolation == sarama.ReadUncommitted || i/txnRecords != txnAborted {
				want = append(want, i)
			}
		}
		c, err := sarama.NewConsumer([]string{p.bootstrap}, ps.consumerConfig(isolation))
		if err != nil {
			return fmt.Errorf("consumer: %w", err)
		}
		defer c.Close()
		pc, err := c.ConsumePartition(ps.txnTopic, 0, sarama.OffsetOldest)
		if err != nil {
			return fmt.Errorf("consume partition: %w", err)
		}
		defer pc.Close()
		for n, i := range want {
			var m *sarama.ConsumerMessage
			select {
			case m = <-pc.Messages():
			case err := <-pc.Errors():
				return fmt.Errorf("after %d of %d records: %w", n, len(want), err)
			case <-ctx.Done():
				return fmt.Errorf("got %d of %d records before the deadline (high watermark %d)", n, len(want), pc.HighWaterMarkOffset())
			}
			got, err := headerIndex(m)
			if err != nil {
				return err
			}
			if got != i {
				return fmt.Errorf("record %d at offset %d where record %d (offset %d) was due", got, m.Offset, i, txnOffset(i))
			}
			if err := p.checkRecord(m, ps.txnTopic, i, 0, txnOffset(i)); err != nil {
				return err
			}
		}
		// Three transactions, each closed by its marker.
		if hwm := pc.HighWaterMarkOffset(); hwm != 3*(txnRecords+1) {
			return fmt.Errorf("high watermark %d, want %d", hwm, 3*(txnRecords+1))
		}
		return nil
	}
}

// checkTxnOffsets commits transaction 3 with offsets for TOPIC-txn-group
// (AddOffsetsToTxn, TxnOffsetCommit), which OffsetFetch then answers.
func (p *probe) checkTxnOffsets(ps *pass) func(context.Context) error {
	return func(ctx context.Context) error {
		prod, err := p.txnProducer(ps)
		if err != nil {
			return err
		}
		defer prod.Close()
		meta := "txn-consumed"
		at := int64(3 * (txnRecords + 1))
		offsets := map[string][]*sarama.PartitionOffsetMetadata{
			ps.txnTopic: {{Partition: 0, Offset: at, LeaderEpoch: -1, Metadata: &meta}},
		}
		if err := p.sendTxn(ps, prod, 3, offsets, false); err != nil {
			return err
		}
		for {
			resp, err := ps.adm.ListConsumerGroupOffsets(ps.txnGroup, map[string][]int32{ps.txnTopic: {0}})
			var b *sarama.OffsetFetchResponseBlock
			if err == nil {
				b = resp.GetBlock(ps.txnTopic, 0)
				if b != nil && b.Err == sarama.ErrNoError && b.Offset == at && b.Metadata == meta {
					return nil
				}
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("group %s: committed %+v (%v), want offset %d metadata %q", ps.txnGroup, b, err, at, meta)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// --------------------------------------------------------------------------
// Deletion

func (p *probe) checkDeleteGroup(ps *pass) func(context.Context) error {
	return func(ctx context.Context) error {
		// Every member left before this check.
		if err := waitGroupEmpty(ctx, ps); err != nil {
			return err
		}
		groups := []string{ps.group}
		if ps.full {
			groups = append(groups, ps.txnGroup)
		}
		for _, group := range groups {
			if err := ps.adm.DeleteConsumerGroup(group); err != nil {
				return fmt.Errorf("delete %s: %w", group, err)
			}
		}
		listed, err := ps.adm.ListConsumerGroups()
		if err != nil {
			return err
		}
		for _, group := range groups {
			if _, ok := listed[group]; ok {
				return fmt.Errorf("%s still listed after DeleteGroups", group)
			}
			resp, err := ps.adm.ListConsumerGroupOffsets(group, nil)
			if err != nil && !errors.Is(err, sarama.ErrGroupIDNotFound) {
				return err
			}
			if err == nil {
				blocks, err := offsetBlocks(resp, group)
				if err != nil {
					return err
				}
				for topic, parts := range blocks {
					for part, b := range parts {
						if b.Offset >= 0 {
							return fmt.Errorf("%s: offset %d of %s[%d] left after DeleteGroups", group, b.Offset, topic, part)
						}
					}
				}
			}
		}
		return nil
	}
}

func (p *probe) checkDeleteTopic(ps *pass) func(context.Context) error {
	return func(ctx context.Context) error {
		topics := []string{ps.topic, ps.txnTopic}
		for _, topic := range topics {
			if err := ps.adm.DeleteTopic(topic); err != nil && !(topic == ps.txnTopic && errors.Is(err, sarama.ErrUnknownTopicOrPartition)) {
				return fmt.Errorf("delete %s: %w", topic, err)
			}
		}
		for {
			all, err := ps.adm.ListTopics()
			if err == nil {
				left := slices.DeleteFunc(slices.Clone(topics), func(t string) bool { _, ok := all[t]; return !ok })
				if len(left) == 0 {
					return nil
				}
				err = fmt.Errorf("%v still listed after DeleteTopics", left)
			}
			select {
			case <-ctx.Done():
				return err
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}
