package kafgres.probe;

import java.time.Duration;
import java.util.Objects;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Predicate;

import org.apache.kafka.common.KafkaFuture;

/** Output, checks and bounded waits shared by the scenarios. */
final class Probe {
    /** How long one admin call or client operation may take before the scenario fails. */
    static final Duration CALL_TIMEOUT = Duration.ofSeconds(30);
    /** How long a scenario waits for state that Apache Kafka makes visible asynchronously. */
    static final Duration SETTLE_TIMEOUT = Duration.ofSeconds(10);

    private Probe() {}

    /** A check that did not hold: the scenario stops and the probe exits 1. */
    static final class CheckFailed extends RuntimeException {
        private static final long serialVersionUID = 1L;

        CheckFailed(String message) {
            super(message);
        }
    }

    /** Prints one result line on stdout. */
    static void line(String format, Object... args) {
        System.out.println(String.format(format, args));
        System.out.flush();
    }

    static void check(boolean condition, String format, Object... args) {
        if (!condition) {
            throw new CheckFailed(String.format(format, args));
        }
    }

    static void checkEqual(String what, Object expected, Object actual) {
        if (!Objects.equals(expected, actual)) {
            throw new CheckFailed(what + ": expected " + expected + ", got " + actual);
        }
    }

    /**
     * Properties with bootstrap.servers set, and those of the file KAFGRES_PROBE_CONFIG names, if it
     * is set (a client's security settings, as the tools' --command-config).
     */
    static Properties config(String bootstrap) {
        Properties props = new Properties();
        String file = System.getenv("KAFGRES_PROBE_CONFIG");
        if (file != null && !file.isEmpty()) {
            try (java.io.Reader reader = java.nio.file.Files.newBufferedReader(java.nio.file.Path.of(file))) {
                props.load(reader);
            } catch (java.io.IOException e) {
                throw new CheckFailed("cannot read KAFGRES_PROBE_CONFIG " + file + ": " + e);
            }
        }
        props.put("bootstrap.servers", bootstrap);
        return props;
    }

    /** The value of a future, failing the scenario after CALL_TIMEOUT. */
    static <T> T await(KafkaFuture<T> future) throws Exception {
        try {
            return future.get(CALL_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            throw new CheckFailed("no answer within " + CALL_TIMEOUT.toSeconds() + " s");
        }
    }

    /**
     * The simple class name of the exception a future failed with, or "ok".
     * Used where the scenario expects a specific error, e.g. TopicExistsException.
     */
    static String outcome(KafkaFuture<?> future) throws Exception {
        try {
            future.get(CALL_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
            return "ok";
        } catch (ExecutionException e) {
            return e.getCause().getClass().getSimpleName();
        } catch (TimeoutException e) {
            throw new CheckFailed("no answer within " + CALL_TIMEOUT.toSeconds() + " s");
        }
    }

    /** A supplier that may throw, for {@link #settle}. */
    interface Read<T> {
        T get() throws Exception;
    }

    /**
     * Reads until the value satisfies `settled` or SETTLE_TIMEOUT passed, and returns the last value
     * read (which the caller prints, so an unsettled state shows in the output).
     */
    static <T> T settle(Read<T> read, Predicate<T> settled) throws Exception {
        long deadline = System.nanoTime() + SETTLE_TIMEOUT.toNanos();
        while (true) {
            T value = read.get();
            if (settled.test(value) || System.nanoTime() >= deadline) {
                return value;
            }
            Thread.sleep(100);
        }
    }
}
