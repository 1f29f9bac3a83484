package gregor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** KafkaConsumer: groups with the classic protocol and with KIP-848, seek, offsetsForTimes. */
@Timeout(90)
class ConsumerTest {

    /** Produces `perPartition` records to each partition, value "p<partition>-<i>", timestamp base + i * 1000. */
    static void produce(String topic, int partitions, int perPartition, long base) throws Exception {
        try (KafkaProducer<String, String> p = Cluster.producer(Map.of(ProducerConfig.ACKS_CONFIG, "all"))) {
            for (int part = 0; part < partitions; part++) {
                for (int i = 0; i < perPartition; i++) {
                    p.send(new ProducerRecord<>(topic, part, base + i * 1000L, "k" + i, "p" + part + "-" + i));
                }
            }
            p.flush();
        }
    }

    static Map<String, Object> groupConfig(String protocol, String group) {
        Map<String, Object> m = new HashMap<>();
        m.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        m.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        if (protocol.equals("classic")) {
            m.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, 6000);
            m.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, 500);
            m.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG,
                    org.apache.kafka.clients.consumer.RangeAssignor.class.getName());
        } else {
            m.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, "range");
        }
        return m;
    }

    /** Records what a rebalance listener saw. */
    static final class Seen implements ConsumerRebalanceListener {
        final List<String> events = new CopyOnWriteArrayList<>();

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            if (!partitions.isEmpty()) {
                events.add("revoked " + partitions.size());
            }
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            events.add("assigned " + partitions.size());
        }
    }

    static Set<Integer> partitions(KafkaConsumer<?, ?> c) {
        Set<Integer> s = new HashSet<>();
        for (TopicPartition tp : c.assignment()) {
            s.add(tp.partition());
        }
        return s;
    }

    /**
     * Subscribe, read everything, commit; a second member joins and the partitions are split
     * between the two; committed offsets are where the first stopped; the second member
     * leaves and the first gets every partition back.
     */
    @ParameterizedTest
    @ValueSource(strings = {"classic", "consumer"})
    void groupSubscribeCommitRebalance(String protocol) throws Exception {
        String topic = Cluster.unique("java-group-" + protocol);
        String group = Cluster.unique("g-" + protocol);
        try (Admin admin = Cluster.admin()) {
            Cluster.createTopic(admin, topic, 4, (short) 1);
        }
        produce(topic, 4, 5, System.currentTimeMillis());

        Seen seenA = new Seen();
        try (KafkaConsumer<String, String> a = Cluster.consumer(groupConfig(protocol, group))) {
            a.subscribe(List.of(topic), seenA);
            List<ConsumerRecord<String, String>> got = Cluster.pollN(a, 20);
            Set<String> values = new HashSet<>();
            for (ConsumerRecord<String, String> r : got) {
                values.add(r.value());
            }
            assertEquals(20, values.size(), "every record once");
            assertEquals(Set.of(0, 1, 2, 3), partitions(a));
            a.commitSync();
            Map<TopicPartition, OffsetAndMetadata> committed = a.committed(
                    Set.of(new TopicPartition(topic, 0), new TopicPartition(topic, 3)));
            assertEquals(5, committed.get(new TopicPartition(topic, 0)).offset());
            assertEquals(5, committed.get(new TopicPartition(topic, 3)).offset());

            try (Admin admin = Cluster.admin()) {
                ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group))
                        .describedGroups().get(group).get();
                assertEquals(GroupState.STABLE, d.groupState());
                assertEquals(protocol.equals("classic") ? GroupType.CLASSIC : GroupType.CONSUMER, d.type());
                assertEquals(1, d.members().size());
            }

            // A second member: the four partitions are split two and two.
            Seen seenB = new Seen();
            try (KafkaConsumer<String, String> b = Cluster.consumer(groupConfig(protocol, group))) {
                b.subscribe(List.of(topic), seenB);
                List<ConsumerRecord<String, String>> extra = new ArrayList<>();
                Cluster.waitUntil("the partitions split between two members", Duration.ofSeconds(40), () -> {
                    a.poll(Duration.ofMillis(100)).forEach(extra::add);
                    b.poll(Duration.ofMillis(100)).forEach(extra::add);
                    Set<Integer> pa = partitions(a);
                    Set<Integer> pb = partitions(b);
                    Set<Integer> all = new HashSet<>(pa);
                    all.addAll(pb);
                    return pa.size() == 2 && pb.size() == 2 && all.equals(Set.of(0, 1, 2, 3));
                });
                assertTrue(extra.isEmpty(), "nothing read twice after the commit: " + extra);
                assertTrue(seenA.events.stream().anyMatch(e -> e.startsWith("revoked")),
                        "the first member gave partitions up: " + seenA.events);
                int assignedToB = seenB.events.stream().filter(e -> e.startsWith("assigned "))
                        .mapToInt(e -> Integer.parseInt(e.substring(9))).sum();
                assertEquals(2, assignedToB, "the second member got two: " + seenB.events);

                // New records reach whichever member owns the partition, once.
                produce(topic, 4, 1, System.currentTimeMillis());
                List<ConsumerRecord<String, String>> fresh = new ArrayList<>();
                Cluster.waitUntil("4 new records", Duration.ofSeconds(20), () -> {
                    a.poll(Duration.ofMillis(100)).forEach(fresh::add);
                    b.poll(Duration.ofMillis(100)).forEach(fresh::add);
                    return fresh.size() >= 4;
                });
                assertEquals(4, fresh.size());
                for (ConsumerRecord<String, String> r : fresh) {
                    assertEquals(5, r.offset(), "the new record, not a replay: " + r);
                }
                a.commitSync();
                b.commitSync();
            }
            // The second member left: the first gets all four back.
            Cluster.waitUntil("every partition back on the first member", Duration.ofSeconds(40), () -> {
                a.poll(Duration.ofMillis(100));
                return partitions(a).equals(Set.of(0, 1, 2, 3));
            });
            Map<TopicPartition, OffsetAndMetadata> after = a.committed(Set.of(
                    new TopicPartition(topic, 0), new TopicPartition(topic, 1),
                    new TopicPartition(topic, 2), new TopicPartition(topic, 3)));
            for (OffsetAndMetadata o : after.values()) {
                assertEquals(6, o.offset());
            }
        }

        // A new member of the group resumes at the committed offsets: nothing to read.
        try (KafkaConsumer<String, String> c = Cluster.consumer(groupConfig(protocol, group))) {
            c.subscribe(List.of(topic));
            Cluster.waitUntil("an assignment", Duration.ofSeconds(30), () -> {
                c.poll(Duration.ofMillis(100)).forEach(r -> {
                    throw new AssertionError("read a committed record again: " + r);
                });
                return partitions(c).size() == 4;
            });
            assertTrue(c.poll(Duration.ofMillis(500)).isEmpty());
            for (TopicPartition tp : c.assignment()) {
                assertEquals(6, c.position(tp));
            }
        }
    }

    @Test
    void seekAndOffsetsForTimes() throws Exception {
        String topic = Cluster.unique("java-seek");
        try (Admin admin = Cluster.admin()) {
            Cluster.createTopic(admin, topic, 1, (short) 1);
        }
        long base = System.currentTimeMillis() - 3_600_000;
        produce(topic, 1, 10, base);
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaConsumer<String, String> c = Cluster.consumer(Map.of())) {
            c.assign(List.of(tp));
            c.seek(tp, 7);
            List<ConsumerRecord<String, String>> got = Cluster.pollN(c, 3);
            assertEquals(7, got.get(0).offset());
            assertEquals("p0-7", got.get(0).value());
            assertEquals(10, c.position(tp));

            c.seekToBeginning(List.of(tp));
            assertEquals(0, c.position(tp));
            c.seekToEnd(List.of(tp));
            assertEquals(10, c.position(tp));

            // The first record at or after the time: 2500 ms after the base is the fourth.
            Map<TopicPartition, OffsetAndTimestamp> at = c.offsetsForTimes(Map.of(tp, base + 2500));
            assertEquals(3, at.get(tp).offset());
            assertEquals(base + 3000, at.get(tp).timestamp());
            at = c.offsetsForTimes(Map.of(tp, base));
            assertEquals(0, at.get(tp).offset());
            // After the last record: no offset.
            at = c.offsetsForTimes(Map.of(tp, base + 10_000));
            assertNull(at.get(tp));
            assertTrue(at.containsKey(tp));

            assertEquals(Map.of(tp, 0L), c.beginningOffsets(List.of(tp)));
            assertEquals(Map.of(tp, 10L), c.endOffsets(List.of(tp)));
            assertNotNull(c.partitionsFor(topic));
            assertEquals(1, c.partitionsFor(topic).size());
        }
    }
}
