package kafgres.streams;

import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueStore;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A word count with exactly-once processing, for tests/e2e/test_streams.py.
 *
 * <pre>
 *   WordCount BOOTSTRAP APPLICATION_ID INPUT_TOPIC OUTPUT_TOPIC STATE_DIR
 * </pre>
 *
 * Lines of INPUT_TOPIC are split into lower-case words, regrouped by word (the
 * repartition topic APPLICATION_ID-{@value #REPARTITION_NAME}-repartition),
 * counted in the persistent (RocksDB) store {@value #STORE_NAME} (the changelog
 * topic APPLICATION_ID-{@value #STORE_NAME}-changelog), and every count update
 * goes to OUTPUT_TOPIC as word -> count (String key, Long value).
 *
 * Stdout gets one line per state change ({@code state: REBALANCING -> RUNNING});
 * the log goes where log4j2.properties says. SIGTERM closes the application
 * cleanly (the JVM exits 143 once the close is done and its NOT_RUNNING line
 * printed); an exception that kills the stream thread shuts it down (exit 1).
 */
public final class WordCount {
    static final String STORE_NAME = "word-counts";
    static final String REPARTITION_NAME = "words";
    /** How long a SIGTERM waits for the clean close (the test waits longer). */
    static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(20);
    /** How long a closed application waits for its state listener's last line. */
    static final Duration LISTENER_TIMEOUT = Duration.ofSeconds(5);

    private static final Logger LOG = LoggerFactory.getLogger(WordCount.class);

    private WordCount() {}

    static Topology topology(String input, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
                .filter((key, word) -> !word.isEmpty())
                .groupBy((key, word) -> word, Grouped.with(REPARTITION_NAME, Serdes.String(), Serdes.String()))
                .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as(STORE_NAME)
                        .withKeySerde(Serdes.String())
                        .withValueSerde(Serdes.Long()))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));
        return builder.build();
    }

    static Properties config(String bootstrap, String applicationId, String stateDir) {
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        // A transaction per 100 ms: a kill -9 lands in the middle of one.
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        // No record cache: every count update is forwarded, so each word's committed output is
        // exactly 1, 2, ..., its count, and a duplicate or lost update shows in the sequence.
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        // A killed instance's member leaves the group after 6 s (the broker's minimum by
        // default) instead of 45 s, so the restarted instance's first rebalance is short.
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1500);
        // -Dkafgres.streams.group.protocol=streams: KIP-1071's Streams groups (Kafka Streams 4.4's
        // group.protocol) instead of the classic consumer group protocol.
        String protocol = System.getProperty("kafgres.streams.group.protocol");
        if (protocol != null) {
            props.put("group.protocol", protocol);
        }
        return props;
    }

    private static void awaitListener(CountDownLatch stopped) {
        try {
            if (!stopped.await(LISTENER_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS)) {
                LOG.warn("closed, but the state listener saw no final state within {}", LISTENER_TIMEOUT);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    public static void main(String[] args) throws InterruptedException {
        if (args.length != 5) {
            System.err.println("usage: WordCount BOOTSTRAP APPLICATION_ID INPUT_TOPIC OUTPUT_TOPIC STATE_DIR");
            System.exit(2);
        }
        KafkaStreams streams = new KafkaStreams(topology(args[2], args[3]), config(args[0], args[1], args[4]));
        CountDownLatch stopped = new CountDownLatch(1);
        AtomicInteger exitCode = new AtomicInteger(0);
        streams.setStateListener((now, before) -> {
            System.out.println("state: " + before + " -> " + now);
            System.out.flush();
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                stopped.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            LOG.error("stream thread died; shutting the application down", e);
            exitCode.set(1);
            return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            LOG.info("SIGTERM: closing the application");
            if (streams.close(CLOSE_TIMEOUT)) {
                // KafkaStreams wakes close() before it calls the state listener (outside its
                // lock, from its close thread, a daemon): without this wait the JVM can halt
                // before the NOT_RUNNING line is printed.
                awaitListener(stopped);
            }
        }, "wordcount-shutdown"));
        streams.start();
        stopped.await();
        streams.close(CLOSE_TIMEOUT);
        System.exit(exitCode.get());
    }
}
