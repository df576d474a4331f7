import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.FeatureUpdate;
import org.apache.kafka.clients.admin.UpdateFeaturesOptions;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Transaction commits with the Java client (kafka-clients of scripts/bench/pom.xml): each
 * transaction sends RECORDS records of VALUE_BYTES bytes over PARTITIONS partitions (round robin)
 * and commits; a commit's time runs from beginTransaction to commitTransaction's return. Run in
 * Java's single-file mode by scripts/bench/txn_bench.py:
 *
 *     java -cp "$(cat .kafgres/bench/kafka-lib/classpath.txt)" scripts/bench/TxnBench.java \
 *         BOOTSTRAP TOPIC SECONDS WARMUP_SECONDS [TRANSACTION_VERSION]
 *
 * With TRANSACTION_VERSION, the feature is first set to it with UpdateFeatures (Apache Kafka's
 * `kafka-features.sh upgrade|downgrade`; Kafgres is set with kafgres.transaction_version instead).
 *
 * Prints one line: the broker's finalized transaction.version (the Java client uses version 2
 * iff it is 2 or more), the commits, commits/s and the commit time's p50, p99 and max in ms.
 */
public final class TxnBench {
    private static final int PARTITIONS = 4;
    private static final int RECORDS = 10;
    private static final int VALUE_BYTES = 100;

    public static void main(String[] args) throws Exception {
        if (args.length != 4 && args.length != 5) {
            System.err.println("usage: TxnBench BOOTSTRAP TOPIC SECONDS WARMUP_SECONDS [TRANSACTION_VERSION]");
            System.exit(2);
        }
        String bootstrap = args[0];
        String topic = args[1];
        long seconds = Long.parseLong(args[2]);
        long warmupSeconds = Long.parseLong(args[3]);

        Properties common = new Properties();
        common.put("bootstrap.servers", bootstrap);
        short transactionVersion;
        try (Admin admin = Admin.create(common)) {
            if (args.length == 5) {
                short level = Short.parseShort(args[4]);
                short current = transactionVersion(admin);
                if (level != current) {
                    FeatureUpdate.UpgradeType type =
                            level < current ? FeatureUpdate.UpgradeType.SAFE_DOWNGRADE : FeatureUpdate.UpgradeType.UPGRADE;
                    admin.updateFeatures(Map.of("transaction.version", new FeatureUpdate(level, type)),
                            new UpdateFeaturesOptions()).all().get();
                }
            }
            try {
                admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1))).all().get();
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof TopicExistsException)) {
                    throw e;
                }
            }
            transactionVersion = transactionVersion(admin);
        }

        Properties props = new Properties();
        props.putAll(common);
        props.put("transactional.id", "txn-bench-" + UUID.randomUUID());
        props.put("key.serializer", ByteArraySerializer.class.getName());
        props.put("value.serializer", ByteArraySerializer.class.getName());
        props.put("linger.ms", "0");
        byte[] value = new byte[VALUE_BYTES];
        List<Long> micros = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            producer.initTransactions();
            long warmupEnd = System.nanoTime() + Duration.ofSeconds(warmupSeconds).toNanos();
            long end = warmupEnd + Duration.ofSeconds(seconds).toNanos();
            long measuredStart = 0;
            while (true) {
                long started = System.nanoTime();
                if (started >= end) {
                    break;
                }
                producer.beginTransaction();
                for (int i = 0; i < RECORDS; i++) {
                    producer.send(new ProducerRecord<>(topic, i % PARTITIONS, null, value));
                }
                producer.commitTransaction();
                long done = System.nanoTime();
                if (started >= warmupEnd) {
                    if (micros.isEmpty()) {
                        measuredStart = started;
                    }
                    micros.add((done - started) / 1_000);
                }
            }
            double elapsed = (System.nanoTime() - measuredStart) / 1e9;
            Collections.sort(micros);
            System.out.printf(
                    "transaction_version=%d commits=%d seconds=%.3f commits_per_s=%.1f p50_ms=%.3f p99_ms=%.3f max_ms=%.3f%n",
                    transactionVersion, micros.size(), elapsed, micros.size() / elapsed, percentile(micros, 0.50),
                    percentile(micros, 0.99), micros.isEmpty() ? 0.0 : micros.get(micros.size() - 1) / 1000.0);
        }
    }

    /** The broker's finalized transaction.version (0: not finalized). */
    private static short transactionVersion(Admin admin) throws Exception {
        Map<String, FinalizedVersionRange> finalized =
                admin.describeFeatures().featureMetadata().get().finalizedFeatures();
        FinalizedVersionRange tv = finalized.get("transaction.version");
        return tv == null ? 0 : tv.maxVersionLevel();
    }

    private static double percentile(List<Long> sorted, double p) {
        if (sorted.isEmpty()) {
            return 0.0;
        }
        int index = (int) Math.min(sorted.size() - 1, Math.ceil(p * sorted.size()) - 1);
        return sorted.get(Math.max(0, index)) / 1000.0;
    }
}
