package kafgres.probe;

import static kafgres.probe.Probe.line;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.GroupAuthorizationException;
import org.apache.kafka.common.errors.GroupIdNotFoundException;
import org.apache.kafka.common.errors.InvalidGroupIdException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Clients that must ride out failovers of the broker without a restart (tests/e2e/test_failover_clients.py):
 * BOOTSTRAP lists the primary and its standby, and the test kills the primary, promotes the standby and
 * brings the old primary back as the new standby while this runs.
 *
 * <p>Until the file named by KAFGRES_STOP_FILE exists (or KAFGRES_RUN_SECONDS, default 300, passed):
 *
 * <ul>
 *   <li>an idempotent acks=all producer sends record SEQ (key and value {@code java-SEQ}) to partition SEQ % 2
 *       of topic NAME, at most {@value #OUTSTANDING_MAX} unacknowledged, and prints {@code acked P OFFSET SEQ}
 *       for each acknowledgement;
 *   <li>a transactional producer (transactional.id NAME-txn) commits transactions of {@value #TXN_RECORDS}
 *       records {@code jtx-ID-SEQ} to the two partitions of NAME-txn and prints {@code committed-txn ID FIRST LAST}
 *       once commitTransaction returned ({@code aborted-txn ID FIRST LAST} after an abort, {@code unknown-txn}
 *       when the outcome is not known);
 *   <li>two group consumers of NAME, one of the classic protocol (group NAME-group) and one of KIP-848's
 *       (group.protocol=consumer, group NAME-group848), print {@code consumed P OFFSET SEQ} and
 *       {@code consumed-kip848 P OFFSET SEQ} for each record and commit (commitSync) every half second.
 * </ul>
 *
 * <p>Then the producers flush and stop ({@code producer-done SENT}, {@code txn-done COUNT}); the consumers go on
 * until each has read every acknowledged record, holds every partition at its end and has committed there, or
 * {@value #DRAIN_S} s passed, and close ({@code TAG-done ...}). The topics must exist. Clients are given generous timeouts (delivery.timeout.ms
 * 120 s) so that a failover of a few seconds is retried, not failed; errors print as {@code error WHAT ...}
 * lines and the clients carry on, except a consumer whose group refuses it for good ({@code error TAG fatal ...}:
 * it stops). The test, not this class, checks the lines against the final log.
 */
final class FailoverScenario {
    private static final int PARTITIONS = 2;
    private static final int OUTSTANDING_MAX = 100;
    private static final long SEND_INTERVAL_MS = 5;
    private static final int TXN_RECORDS = 4;
    private static final long TXN_INTERVAL_MS = 50;
    private static final int COMMIT_ATTEMPTS_MAX = 5;
    private static final long DRAIN_S = 30;
    private static final Duration POLL = Duration.ofMillis(200);
    private static final Duration COMMIT_INTERVAL = Duration.ofMillis(500);
    private static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(10);
    /** Joins of the client threads after the stop: the flush is bounded by delivery.timeout.ms. */
    private static final long JOIN_TIMEOUT_MS = 200_000;

    private FailoverScenario() {}

    /** The stop file, or the deadline, seen by every thread. */
    private static final class Stop {
        private final Path file;
        private final long deadlineNanos;
        private volatile boolean requested;

        Stop(Path file, long runSeconds) {
            this.file = file;
            this.deadlineNanos = System.nanoTime() + TimeUnit.SECONDS.toNanos(runSeconds);
        }

        boolean requested() {
            // An error on stdout: whoever reads the lines is gone.
            if (!requested && (Files.exists(file) || System.nanoTime() > deadlineNanos || System.out.checkError())) {
                requested = true;
            }
            return requested;
        }
    }

    static void run(String bootstrap, String name) throws Exception {
        String stopFile = System.getenv("KAFGRES_STOP_FILE");
        Probe.check(stopFile != null && !stopFile.isEmpty(), "KAFGRES_STOP_FILE is not set");
        String runSeconds = System.getenv().getOrDefault("KAFGRES_RUN_SECONDS", "300");
        Stop stop = new Stop(Path.of(stopFile), Long.parseLong(runSeconds));
        Set<Long> acked = ConcurrentHashMap.newKeySet();
        Semaphore producerDone = new Semaphore(0);

        List<Thread> threads = List.of(
                new Thread(() -> produce(bootstrap, name, stop, acked, producerDone), "producer"),
                new Thread(() -> produceTransactions(bootstrap, name + "-txn", name + "-txn", stop), "txn"),
                new Thread(() -> consume(bootstrap, name, name + "-group", "classic", "consumed", acked,
                        producerDone), "classic"),
                new Thread(() -> consume(bootstrap, name, name + "-group848", "consumer", "consumed-kip848", acked,
                        producerDone), "kip848"));
        threads.forEach(Thread::start);
        long joinDeadline = Long.MAX_VALUE;
        for (Thread t : threads) {
            while (t.isAlive()) {
                if (stop.requested() && joinDeadline == Long.MAX_VALUE) {
                    joinDeadline = System.currentTimeMillis() + JOIN_TIMEOUT_MS;
                }
                Probe.check(System.currentTimeMillis() < joinDeadline, "thread %s did not end", t.getName());
                t.join(100);
            }
        }
        line("done");
    }

    private static String describe(Throwable e) {
        StringBuilder text = new StringBuilder(e.getClass().getSimpleName()).append(": ").append(e.getMessage());
        if (e.getCause() != null && e.getCause() != e) {
            text.append(" (cause ").append(e.getCause().getClass().getSimpleName()).append(": ")
                    .append(e.getCause().getMessage()).append(')');
        }
        return text.toString().replace('\n', ' ');
    }

    private static Properties producerConfig(String bootstrap) {
        Properties props = Probe.config(bootstrap);
        props.put("acks", "all");
        props.put("enable.idempotence", "true");
        props.put("linger.ms", "5");
        props.put("delivery.timeout.ms", "120000");
        props.put("request.timeout.ms", "15000");
        props.put("max.block.ms", "60000");
        // The default since 4.0, said here because it is what finds the standby when the primary is gone.
        props.put("metadata.recovery.strategy", "rebootstrap");
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        return props;
    }

    private static void produce(String bootstrap, String topic, Stop stop, Set<Long> acked, Semaphore done) {
        long seq = 0;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerConfig(bootstrap))) {
            Semaphore window = new Semaphore(OUTSTANDING_MAX);
            while (!stop.requested()) {
                if (!window.tryAcquire(100, TimeUnit.MILLISECONDS)) {
                    continue;
                }
                long s = seq++;
                String value = "java-" + s;
                try {
                    producer.send(new ProducerRecord<>(topic, (int) (s % PARTITIONS), value, value), (md, e) -> {
                        window.release();
                        if (e == null) {
                            acked.add(s);
                            line("acked %d %d %d", md.partition(), md.offset(), s);
                        } else {
                            line("error produce %d %s", s, describe(e));
                        }
                    });
                } catch (KafkaException e) {
                    window.release();
                    line("error send %d %s", s, describe(e));
                    Thread.sleep(100);
                }
                Thread.sleep(SEND_INTERVAL_MS);
            }
            producer.flush();
        } catch (Exception e) {
            line("error producer %s", describe(e));
        } finally {
            line("producer-done %d", seq);
            done.release(2);
        }
    }

    private static KafkaProducer<String, String> transactional(String bootstrap, String transactionalId, Stop stop) {
        Properties props = producerConfig(bootstrap);
        props.put("transactional.id", transactionalId);
        props.put("transaction.timeout.ms", "60000");
        props.put("max.block.ms", "30000");
        while (true) {
            KafkaProducer<String, String> producer = new KafkaProducer<>(props);
            try {
                producer.initTransactions();
                return producer;
            } catch (KafkaException e) {
                line("error init-transactions %s", describe(e));
                producer.close(Duration.ZERO);
                if (stop.requested()) {
                    return null;
                }
            }
        }
    }

    private static void produceTransactions(String bootstrap, String transactionalId, String topic, Stop stop) {
        long id = 0;
        KafkaProducer<String, String> producer = transactional(bootstrap, transactionalId, stop);
        try {
            while (producer != null && !stop.requested()) {
                long first = id * TXN_RECORDS;
                long last = first + TXN_RECORDS - 1;
                String outcome = "committed-txn";
                try {
                    producer.beginTransaction();
                    for (long s = first; s <= last; s++) {
                        producer.send(new ProducerRecord<>(topic, (int) (s % PARTITIONS), null, "jtx-" + id + "-" + s));
                    }
                    outcome = commit(producer, id, stop);
                } catch (KafkaException e) {
                    line("error txn %d %s", id, describe(e));
                    outcome = "aborted-txn";
                    try {
                        producer.abortTransaction();
                    } catch (KafkaException abortFailed) {
                        // A fatal state (fenced, or an error the producer cannot recover from): a new producer with
                        // the same transactional.id ends whatever this one left open.
                        line("error abort %d %s", id, describe(abortFailed));
                        outcome = "unknown-txn";
                        producer.close(Duration.ZERO);
                        producer = transactional(bootstrap, transactionalId, stop);
                    }
                }
                line("%s %d %d %d", outcome, id, first, last);
                id++;
                Thread.sleep(TXN_INTERVAL_MS);
            }
        } catch (InterruptedException e) {
            line("error txn interrupted");
        } finally {
            if (producer != null) {
                producer.close(CLOSE_TIMEOUT);
            }
            line("txn-done %d", id);
        }
    }

    /** commitTransaction, retried after a timeout as the Java client allows; what to print of the outcome. */
    private static String commit(KafkaProducer<String, String> producer, long id, Stop stop) {
        for (int attempt = 1; ; attempt++) {
            try {
                producer.commitTransaction();
                return "committed-txn";
            } catch (TimeoutException e) {
                line("error commit-txn %d attempt %d %s", id, attempt, describe(e));
                if (attempt >= COMMIT_ATTEMPTS_MAX && stop.requested()) {
                    return "unknown-txn";
                }
            }
        }
    }

    private static void consume(String bootstrap, String topic, String group, String protocol, String tag,
            Set<Long> acked, Semaphore producerDone) {
        Properties props = Probe.config(bootstrap);
        props.put("group.id", group);
        props.put("group.protocol", protocol);
        props.put("auto.offset.reset", "earliest");
        props.put("enable.auto.commit", "false");
        props.put("metadata.recovery.strategy", "rebootstrap");
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        Set<Long> consumed = ConcurrentHashMap.newKeySet();
        AtomicLong records = new AtomicLong();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            consumer.subscribe(List.of(topic));
            long drainDeadline = Long.MAX_VALUE;
            long nextCommit = System.nanoTime() + COMMIT_INTERVAL.toNanos();
            while (true) {
                if (drainDeadline == Long.MAX_VALUE && producerDone.tryAcquire()) {
                    drainDeadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(DRAIN_S);
                }
                if (drainDeadline != Long.MAX_VALUE
                        && (System.nanoTime() > drainDeadline
                                || (consumed.containsAll(acked) && committedToTheEnd(consumer, topic, tag)))) {
                    break;
                }
                try {
                    for (ConsumerRecord<String, String> r : consumer.poll(POLL)) {
                        long seq = Long.parseLong(r.value().substring("java-".length()));
                        consumed.add(seq);
                        records.incrementAndGet();
                        line("%s %d %d %d", tag, r.partition(), r.offset(), seq);
                    }
                } catch (GroupIdNotFoundException | GroupAuthorizationException | InvalidGroupIdException
                        | UnsupportedVersionException e) {
                    // The consumer cannot go on in its group (for KIP-848's, its member is in a fatal state).
                    line("error %s fatal %s", tag, describe(e));
                    break;
                } catch (KafkaException e) {
                    line("error %s %s", tag, describe(e));
                    Thread.sleep(POLL.toMillis());
                }
                if (System.nanoTime() > nextCommit) {
                    nextCommit = System.nanoTime() + COMMIT_INTERVAL.toNanos();
                    try {
                        consumer.commitSync(Probe.CALL_TIMEOUT);
                    } catch (KafkaException e) {
                        line("error %s commit %s", tag, describe(e));
                    }
                }
            }
            Set<Long> missing = ConcurrentHashMap.newKeySet();
            missing.addAll(acked);
            missing.removeAll(consumed);
            line("%s-done records %d distinct %d missing %d", tag, records.get(), consumed.size(), missing.size());
        } catch (Exception e) {
            line("error %s consumer %s", tag, describe(e));
        }
    }

    /**
     * Whether this member holds every partition of TOPIC, at its end, and has committed there: the drain's
     * end. Having read every acknowledged record is not enough: after a failover a member rejoins and starts
     * again from its last commit, and a member still rejoining holds no partition (its commit would commit
     * nothing).
     */
    private static boolean committedToTheEnd(KafkaConsumer<String, String> consumer, String topic, String tag) {
        try {
            Set<TopicPartition> assigned = consumer.assignment();
            if (assigned.size() < PARTITIONS) {
                return false;
            }
            Map<TopicPartition, Long> ends = consumer.endOffsets(assigned, Probe.CALL_TIMEOUT);
            for (TopicPartition tp : assigned) {
                if (!tp.topic().equals(topic) || consumer.position(tp, Probe.CALL_TIMEOUT) < ends.get(tp)) {
                    return false;
                }
            }
            consumer.commitSync(Probe.CALL_TIMEOUT);
            return true;
        } catch (KafkaException | IllegalStateException e) {
            // IllegalStateException: a rebalance took a partition away between assignment() and position().
            line("error %s final commit %s", tag, describe(e));
            return false;
        }
    }
}
