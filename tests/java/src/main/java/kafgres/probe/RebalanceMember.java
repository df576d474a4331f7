package kafgres.probe;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.BooleanSupplier;

import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;

/**
 * A group member for the rebalance scenarios: what its rebalance listener saw (assigned, revoked,
 * lost), what it owns now and the records it read. Scenarios poll several members in turn from one
 * thread, each poll short.
 */
final class RebalanceMember implements ConsumerRebalanceListener {
    private static final Duration POLL = Duration.ofMillis(100);

    final String name;
    final KafkaConsumer<String, String> consumer;
    final Set<Integer> owned = new TreeSet<>();
    final Set<Integer> revoked = new TreeSet<>();
    final Set<Integer> lost = new TreeSet<>();
    final List<ConsumerRecord<String, String>> records = new ArrayList<>();
    /** Partitions assigned while already owned (an incremental rebalance must not do that). */
    int reassignedOwned;
    private final boolean commitAfterPoll;

    RebalanceMember(String name, KafkaConsumer<String, String> consumer, boolean commitAfterPoll) {
        this.name = name;
        this.consumer = consumer;
        this.commitAfterPoll = commitAfterPoll;
    }

    @Override
    public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
        for (TopicPartition tp : partitions) {
            if (!owned.add(tp.partition())) {
                reassignedOwned++;
            }
        }
    }

    @Override
    public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
        partitions.forEach(tp -> {
            revoked.add(tp.partition());
            owned.remove(tp.partition());
        });
    }

    @Override
    public void onPartitionsLost(Collection<TopicPartition> partitions) {
        partitions.forEach(tp -> {
            lost.add(tp.partition());
            owned.remove(tp.partition());
        });
    }

    /** One short poll; with `commitAfterPoll`, a synchronous commit of what it returned. */
    void poll() {
        ConsumerRecords<String, String> batch = consumer.poll(POLL);
        batch.forEach(records::add);
        if (commitAfterPoll && !batch.isEmpty()) {
            consumer.commitSync();
        }
    }

    /** Polls `members` in turn until `done`, failing the scenario after `timeout`. */
    static void pollUntil(List<RebalanceMember> members, BooleanSupplier done, Duration timeout, String what) {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (!done.getAsBoolean()) {
            Probe.check(System.nanoTime() < deadline, "not within %d s: %s", timeout.toSeconds(), what);
            members.forEach(RebalanceMember::poll);
        }
    }
}
