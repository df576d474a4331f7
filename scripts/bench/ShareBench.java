import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Share-group delivery (KIP-932) with the Java client's KafkaShareConsumer (kafka-clients 4.4), run by
 * scripts/bench/share_bench.py in Java's single-file mode:
 *
 *     java -cp "$(cat .kafgres/bench/kafka-4.4.0-lib/classpath.txt)" scripts/bench/ShareBench.java \
 *         BOOTSTRAP TOPIC PARTITIONS RECORDS SECONDS RELEASE_RECORDS RELEASE_EVERY [FETCH_MAX_BYTES]
 *
 * Creates TOPIC and TOPIC-r with PARTITIONS partitions, produces RECORDS records of 1 KiB to TOPIC and
 * RELEASE_RECORDS to TOPIC-r (round robin over the partitions, acks=all), sets share.auto.offset.reset
 * = earliest on the two share groups (IncrementalAlterConfigs on a GROUP resource), then two phases,
 * each with CONSUMERS KafkaShareConsumers (one thread each, one JVM, explicit acknowledgement mode:
 * every record is acknowledged, then commitSync() sends the acknowledgements and returns once the
 * broker answered):
 *
 * 1. throughput (group TOPIC-g on TOPIC): every record is accepted. The phase ends when RECORDS were
 *    accepted or SECONDS after the first delivery. records_per_s = records accepted / (last
 *    commitSync return - first delivery). Each record's deliveries are counted: delivered_twice are
 *    records delivered more than once, missing records never delivered (only when all were to be).
 * 2. redelivery (group TOPIC-r-g on TOPIC-r): a record whose offset is a multiple of RELEASE_EVERY is
 *    released on its first delivery (RELEASE, commitSync), every other delivery is accepted. A
 *    sample's latency runs from that commitSync's return to the record's next delivery, to any
 *    consumer (all consumers share one monotonic clock); a redelivery can beat the releasing
 *    consumer's commitSync return, so a latency may be negative (early counts those). The r_sent_*
 *    latencies run from the commitSync call instead (the release leaving the client). The phase ends
 *    once all RELEASE_RECORDS were accepted. Unexpected deliveries (a record delivered twice that was
 *    not released, a released record delivered more than twice, a delivery count that is not the
 *    number of deliveries seen) are counted in r_anomalies.
 *
 * The consumers keep the client's defaults (fetch.max.bytes 50 MiB, max.poll.records 500) unless
 * FETCH_MAX_BYTES is given (a diagnostic: what a ShareFetch may return, which bounds what Kafgres reads).
 *
 * Prints one line of key=value fields, and on standard error the records accepted in each second. The
 * topics, the groups and their configs are deleted at the end.
 */
public final class ShareBench {
    private static final int CONSUMERS = 4;
    private static final int VALUE_BYTES = 1024;
    private static final Duration POLL = Duration.ofMillis(100);
    private static final Duration FIRST_DELIVERY_WITHIN = Duration.ofSeconds(60);
    private static final Duration REDELIVERY_PHASE_MAX = Duration.ofSeconds(180);

    public static void main(String[] args) throws Exception {
        if (args.length != 7 && args.length != 8) {
            System.err.println("usage: ShareBench BOOTSTRAP TOPIC PARTITIONS RECORDS SECONDS RELEASE_RECORDS"
                    + " RELEASE_EVERY [FETCH_MAX_BYTES]");
            System.exit(2);
        }
        String bootstrap = args[0];
        String topic = args[1];
        int partitions = Integer.parseInt(args[2]);
        int records = Integer.parseInt(args[3]);
        long seconds = Long.parseLong(args[4]);
        int releaseRecords = Integer.parseInt(args[5]);
        int releaseEvery = Integer.parseInt(args[6]);
        String fetchMaxBytes = args.length == 8 ? args[7] : null;
        String releaseTopic = topic + "-r";
        String group = topic + "-g";
        String releaseGroup = releaseTopic + "-g";

        Properties common = new Properties();
        common.put("bootstrap.servers", bootstrap);
        Properties consumers = new Properties();
        consumers.putAll(common);
        if (fetchMaxBytes != null) {
            consumers.put("fetch.max.bytes", fetchMaxBytes);
        }
        Map<String, String> out = new java.util.LinkedHashMap<>();
        try (Admin admin = Admin.create(common)) {
            admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1),
                    new NewTopic(releaseTopic, partitions, (short) 1))).all().get();
            for (String g : List.of(group, releaseGroup)) {
                admin.incrementalAlterConfigs(Map.of(new ConfigResource(ConfigResource.Type.GROUP, g),
                        List.of(new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"),
                                AlterConfigOp.OpType.SET)))).all().get();
            }
            long produceStart = System.nanoTime();
            produce(common, topic, partitions, records);
            produce(common, releaseTopic, partitions, releaseRecords);
            out.put("produce_s", fmt((System.nanoTime() - produceStart) / 1e9));
            try {
                throughput(consumers, group, topic, partitions, records, seconds, out);
                redelivery(consumers, releaseGroup, releaseTopic, partitions, releaseRecords, releaseEvery, out);
            } finally {
                try {
                    admin.deleteShareGroups(List.of(group, releaseGroup)).all().get();
                } catch (Exception e) {
                    out.put("delete_groups", e.getClass().getSimpleName());
                }
                // Deleting a group keeps its configs, on Kafka 4.4 as on Kafgres.
                Map<ConfigResource, java.util.Collection<AlterConfigOp>> unset = new HashMap<>();
                for (String g : List.of(group, releaseGroup)) {
                    unset.put(new ConfigResource(ConfigResource.Type.GROUP, g), List.of(new AlterConfigOp(
                            new ConfigEntry("share.auto.offset.reset", ""), AlterConfigOp.OpType.DELETE)));
                }
                admin.incrementalAlterConfigs(unset).all().get();
                admin.deleteTopics(List.of(topic, releaseTopic)).all().get();
            }
        }
        StringBuilder line = new StringBuilder();
        out.forEach((k, v) -> line.append(line.length() == 0 ? "" : " ").append(k).append('=').append(v));
        System.out.println(line);
    }

    private static void produce(Properties common, String topic, int partitions, int records) throws Exception {
        Properties p = new Properties();
        p.putAll(common);
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        p.put("acks", "all");
        p.put("linger.ms", "5");
        p.put("batch.size", String.valueOf(256 * 1024));
        byte[] value = new byte[VALUE_BYTES];
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < records; i++) {
                producer.send(new ProducerRecord<>(topic, i % partitions, null, value));
            }
            producer.flush();
        }
    }

    private static KafkaShareConsumer<byte[], byte[]> consumer(Properties common, String group, int index) {
        Properties p = new Properties();
        p.putAll(common);
        p.put("group.id", group);
        p.put("client.id", group + "-" + index);
        p.put("share.acknowledgement.mode", "explicit");
        return new KafkaShareConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    /** Deliveries per (partition, offset); offsets are those the producer wrote, 0 up. */
    private static final class Deliveries {
        final AtomicIntegerArray[] counts;

        Deliveries(int partitions, int records) {
            counts = new AtomicIntegerArray[partitions];
            for (int i = 0; i < partitions; i++) {
                counts[i] = new AtomicIntegerArray(records / partitions + 1);
            }
        }

        /** The number of deliveries of the record so far, this one included; -1 for an offset never produced. */
        int add(ConsumerRecord<?, ?> r) {
            AtomicIntegerArray c = counts[r.partition()];
            return r.offset() < c.length() ? c.incrementAndGet((int) r.offset()) : -1;
        }

        /** Histogram of deliveries per produced record (0: never delivered). */
        Map<Integer, Integer> histogram(int partitions, int records) {
            Map<Integer, Integer> h = new TreeMap<>();
            for (int i = 0; i < records; i++) {
                h.merge(counts[i % partitions].get(i / partitions), 1, Integer::sum);
            }
            return h;
        }
    }

    private interface Worker {
        void run(int index, KafkaShareConsumer<byte[], byte[]> c) throws Exception;
    }

    private static void runConsumers(Properties common, String group, String topic, Worker worker) throws Exception {
        List<Thread> threads = new ArrayList<>();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        for (int i = 0; i < CONSUMERS; i++) {
            int index = i;
            Thread t = new Thread(() -> {
                try (KafkaShareConsumer<byte[], byte[]> c = consumer(common, group, index)) {
                    c.subscribe(List.of(topic));
                    worker.run(index, c);
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            }, "share-bench-" + i);
            threads.add(t);
            t.start();
        }
        for (Thread t : threads) {
            t.join();
        }
        if (failure.get() != null) {
            throw new RuntimeException("a share consumer failed", failure.get());
        }
    }

    /** Records per partition in a commitSync's result that succeeded; failures are counted by name. */
    private static int accepted(Map<TopicIdPartition, Optional<KafkaException>> result, Map<Integer, Integer> sent,
            Map<String, Integer> errors) {
        int n = 0;
        for (Map.Entry<TopicIdPartition, Optional<KafkaException>> e : result.entrySet()) {
            if (e.getValue().isPresent()) {
                errors.merge(e.getValue().get().getClass().getSimpleName(), 1, Integer::sum);
            } else {
                n += sent.getOrDefault(e.getKey().partition(), 0);
            }
        }
        return n;
    }

    private static void throughput(Properties common, String group, String topic, int partitions, int records,
            long seconds, Map<String, String> out) throws Exception {
        Deliveries deliveries = new Deliveries(partitions, records);
        AtomicLong accepted = new AtomicLong();
        AtomicLong firstDelivery = new AtomicLong(Long.MAX_VALUE);
        AtomicLong lastAck = new AtomicLong();
        AtomicLong unknown = new AtomicLong();
        AtomicBoolean stop = new AtomicBoolean();
        long[] perConsumer = new long[CONSUMERS];
        long[] polls = new long[CONSUMERS];
        Map<String, Integer> errors = new ConcurrentHashMap<>();
        long started = System.nanoTime();
        // The records accepted in each second since the first delivery: a rate that falls during the phase
        // shows here (on standard error).
        Thread timeline = new Thread(() -> {
            StringBuilder b = new StringBuilder("timeline records/s:");
            long previous = 0;
            try {
                while (!stop.get()) {
                    Thread.sleep(1000);
                    long now = accepted.get();
                    b.append(' ').append(now - previous);
                    previous = now;
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            System.err.println(b);
        }, "share-bench-timeline");
        timeline.setDaemon(true);
        timeline.start();
        runConsumers(common, group, topic, (index, c) -> {
            while (!stop.get()) {
                long now = System.nanoTime();
                long first = firstDelivery.get();
                if (accepted.get() >= records || (first != Long.MAX_VALUE && now - first > seconds * 1_000_000_000L)
                        || (first == Long.MAX_VALUE && now - started > FIRST_DELIVERY_WITHIN.toNanos())) {
                    stop.set(true);
                    break;
                }
                ConsumerRecords<byte[], byte[]> batch = c.poll(POLL);
                if (batch.isEmpty()) {
                    continue;
                }
                long got = System.nanoTime();
                firstDelivery.accumulateAndGet(got, Math::min);
                Map<Integer, Integer> sent = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : batch) {
                    if (deliveries.add(r) < 0) {
                        unknown.incrementAndGet();
                    }
                    c.acknowledge(r, AcknowledgeType.ACCEPT);
                    sent.merge(r.partition(), 1, Integer::sum);
                }
                int n = accepted(c.commitSync(), sent, errors);
                lastAck.accumulateAndGet(System.nanoTime(), Math::max);
                accepted.addAndGet(n);
                perConsumer[index] += n;
                polls[index]++;
            }
        });
        timeline.join();
        if (firstDelivery.get() == Long.MAX_VALUE) {
            throw new RuntimeException("nothing was delivered within " + FIRST_DELIVERY_WITHIN);
        }
        double elapsed = (lastAck.get() - firstDelivery.get()) / 1e9;
        Map<Integer, Integer> histogram = deliveries.histogram(partitions, records);
        int twice = histogram.entrySet().stream().filter(e -> e.getKey() > 1).mapToInt(Map.Entry::getValue).sum();
        out.put("accepted", String.valueOf(accepted.get()));
        out.put("seconds", fmt(elapsed));
        out.put("records_per_s", String.format("%.0f", accepted.get() / elapsed));
        out.put("mib_per_s", fmt(accepted.get() * (double) VALUE_BYTES / elapsed / (1 << 20)));
        out.put("join_s", fmt((firstDelivery.get() - started) / 1e9));
        out.put("delivered_twice", String.valueOf(twice));
        out.put("missing", accepted.get() >= records ? String.valueOf(histogram.getOrDefault(0, 0)) : "n/a");
        out.put("unknown_offsets", String.valueOf(unknown.get()));
        out.put("ack_errors", errors.isEmpty() ? "0" : errors.toString().replace(", ", ","));
        out.put("per_consumer", join(perConsumer));
        out.put("records_per_poll", String.format("%.1f", accepted.get() / (double) Math.max(1, sum(polls))));
    }

    private static void redelivery(Properties common, String group, String topic, int partitions, int records,
            int releaseEvery, Map<String, String> out) throws Exception {
        Deliveries deliveries = new Deliveries(partitions, records);
        Map<Long, Long> releasedAt = new ConcurrentHashMap<>();
        Map<Long, Long> releaseSentAt = new ConcurrentHashMap<>();
        Map<Long, Long> redeliveredAt = new ConcurrentHashMap<>();
        AtomicLong accepted = new AtomicLong();
        AtomicLong anomalies = new AtomicLong();
        AtomicBoolean stop = new AtomicBoolean();
        Map<Integer, Integer> deliveryCounts = new ConcurrentHashMap<>();
        Map<String, Integer> errors = new ConcurrentHashMap<>();
        long started = System.nanoTime();
        runConsumers(common, group, topic, (index, c) -> {
            while (!stop.get()) {
                if (accepted.get() >= records || System.nanoTime() - started > REDELIVERY_PHASE_MAX.toNanos()) {
                    stop.set(true);
                    break;
                }
                ConsumerRecords<byte[], byte[]> batch = c.poll(POLL);
                if (batch.isEmpty()) {
                    continue;
                }
                long got = System.nanoTime();
                Map<Integer, Integer> sent = new HashMap<>();
                List<Long> released = new ArrayList<>();
                for (ConsumerRecord<byte[], byte[]> r : batch) {
                    int seen = deliveries.add(r);
                    int count = r.deliveryCount().map(Short::intValue).orElse(-1);
                    deliveryCounts.merge(count, 1, Integer::sum);
                    long key = (long) r.partition() << 40 | r.offset();
                    boolean sampled = r.offset() % releaseEvery == 0;
                    if (seen != count || seen < 0 || seen > (sampled ? 2 : 1)) {
                        anomalies.incrementAndGet();
                    }
                    if (sampled && seen == 1) {
                        c.acknowledge(r, AcknowledgeType.RELEASE);
                        released.add(key);
                    } else {
                        if (sampled) {
                            redeliveredAt.putIfAbsent(key, got);
                        }
                        c.acknowledge(r, AcknowledgeType.ACCEPT);
                        sent.merge(r.partition(), 1, Integer::sum);
                    }
                }
                long sending = System.nanoTime();
                Map<TopicIdPartition, Optional<KafkaException>> result = c.commitSync();
                long done = System.nanoTime();
                for (long key : released) {
                    releaseSentAt.put(key, sending);
                    releasedAt.put(key, done);
                }
                accepted.addAndGet(accepted(result, sent, errors));
            }
        });
        List<Long> micros = new ArrayList<>();
        List<Long> sentMicros = new ArrayList<>();
        int early = 0;
        for (Map.Entry<Long, Long> e : releasedAt.entrySet()) {
            Long again = redeliveredAt.get(e.getKey());
            if (again != null) {
                long us = (again - e.getValue()) / 1_000;
                micros.add(us);
                sentMicros.add((again - releaseSentAt.get(e.getKey())) / 1_000);
                early += us < 0 ? 1 : 0;
            }
        }
        Collections.sort(micros);
        Collections.sort(sentMicros);
        out.put("r_accepted", String.valueOf(accepted.get()));
        out.put("r_seconds", fmt((System.nanoTime() - started) / 1e9));
        out.put("r_released", String.valueOf(releasedAt.size()));
        out.put("r_redelivered", String.valueOf(micros.size()));
        out.put("r_p50_ms", fmt(percentile(micros, 0.50)));
        out.put("r_p99_ms", fmt(percentile(micros, 0.99)));
        out.put("r_max_ms", fmt(micros.isEmpty() ? 0.0 : micros.get(micros.size() - 1) / 1000.0));
        out.put("r_early", String.valueOf(early));
        out.put("r_sent_p50_ms", fmt(percentile(sentMicros, 0.50)));
        out.put("r_sent_p99_ms", fmt(percentile(sentMicros, 0.99)));
        out.put("r_anomalies", String.valueOf(anomalies.get()));
        out.put("r_ack_errors", errors.isEmpty() ? "0" : errors.toString().replace(", ", ","));
        out.put("r_delivery_counts", histogram(new TreeMap<>(deliveryCounts)));
        out.put("r_deliveries", histogram(deliveries.histogram(partitions, records)));
    }

    /** "value:count,…", e.g. deliveries per record "1:4950,2:50". */
    private static String histogram(Map<Integer, Integer> h) {
        StringBuilder b = new StringBuilder();
        h.forEach((k, v) -> b.append(b.length() == 0 ? "" : ",").append(k).append(':').append(v));
        return b.toString();
    }

    private static double percentile(List<Long> sorted, double p) {
        if (sorted.isEmpty()) {
            return 0.0;
        }
        int index = (int) Math.min(sorted.size() - 1, Math.ceil(p * sorted.size()) - 1);
        return sorted.get(Math.max(0, index)) / 1000.0;
    }

    private static String fmt(double v) {
        return String.format("%.3f", v);
    }

    private static long sum(long[] values) {
        long s = 0;
        for (long v : values) {
            s += v;
        }
        return s;
    }

    private static String join(long[] values) {
        StringBuilder b = new StringBuilder();
        for (long v : values) {
            b.append(b.length() == 0 ? "" : "/").append(v);
        }
        return b.toString();
    }
}
