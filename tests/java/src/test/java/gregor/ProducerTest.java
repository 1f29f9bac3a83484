package gregor;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Future;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.record.TimestampType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** KafkaProducer (idempotent, acks=all, every codec) read back by KafkaConsumer. */
@Timeout(60)
class ProducerTest {
    static final int N = 200;

    @ParameterizedTest
    @ValueSource(strings = {"none", "gzip", "snappy", "lz4", "zstd"})
    void idempotentAcksAllRoundTripsEveryCodec(String codec) throws Exception {
        String topic = Cluster.unique("java-codec-" + codec);
        try (Admin admin = Cluster.admin()) {
            // RF 3: acks=all waits for the followers.
            Cluster.createTopic(admin, topic, 2, (short) Math.min(3, Cluster.brokerIds().size()));
        }
        long base = System.currentTimeMillis() - 60_000;
        List<RecordMetadata> acked = new ArrayList<>();
        try (KafkaProducer<String, String> p = Cluster.producer(Map.of(
                ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true,
                ProducerConfig.ACKS_CONFIG, "all",
                ProducerConfig.COMPRESSION_TYPE_CONFIG, codec,
                ProducerConfig.LINGER_MS_CONFIG, 20,
                ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, 5))) {
            List<Future<RecordMetadata>> futures = new ArrayList<>();
            for (int i = 0; i < N; i++) {
                RecordHeaders h = new RecordHeaders();
                h.add("i", Integer.toString(i).getBytes(StandardCharsets.UTF_8));
                h.add("codec", codec.getBytes(StandardCharsets.UTF_8));
                // A compressible value, so the codec has something to do.
                String value = ("value-" + i + "-").repeat(20);
                futures.add(p.send(new ProducerRecord<>(topic, i % 2, base + i, "key-" + i, value, h)));
            }
            p.flush();
            for (Future<RecordMetadata> f : futures) {
                acked.add(f.get());
            }
        }
        // Each partition's offsets are 0..n-1 in send order (idempotence keeps the order).
        long[] next = new long[2];
        for (int i = 0; i < N; i++) {
            RecordMetadata m = acked.get(i);
            assertEquals(i % 2, m.partition());
            assertEquals(next[m.partition()]++, m.offset(), "offset of record " + i);
            assertEquals(base + i, m.timestamp());
        }

        try (KafkaConsumer<String, String> c = Cluster.consumer(Map.of())) {
            List<TopicPartition> tps = List.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1));
            c.assign(tps);
            c.seekToBeginning(tps);
            List<ConsumerRecord<String, String>> records = Cluster.pollN(c, N);
            records.sort((a, b) -> Long.compare(a.timestamp(), b.timestamp()));
            for (int i = 0; i < N; i++) {
                ConsumerRecord<String, String> r = records.get(i);
                assertEquals("key-" + i, r.key());
                assertEquals(("value-" + i + "-").repeat(20), r.value());
                assertEquals(i % 2, r.partition());
                assertEquals(i / 2, r.offset());
                assertEquals(base + i, r.timestamp());
                assertEquals(TimestampType.CREATE_TIME, r.timestampType());
                Header[] hs = r.headers().toArray();
                assertEquals(2, hs.length);
                assertEquals("i", hs[0].key());
                assertArrayEquals(Integer.toString(i).getBytes(StandardCharsets.UTF_8), hs[0].value());
                assertEquals("codec", hs[1].key());
                assertArrayEquals(codec.getBytes(StandardCharsets.UTF_8), hs[1].value());
            }
            assertEquals(Map.of(tps.get(0), (long) N / 2, tps.get(1), (long) N / 2), c.endOffsets(tps));
        }
    }

    @Test
    void logAppendTimeTopicStampsTheBrokersTime() throws Exception {
        String topic = Cluster.unique("java-logappend");
        try (Admin admin = Cluster.admin()) {
            Cluster.createTopic(admin, new NewTopic(topic, 1, (short) 1)
                    .configs(Map.of("message.timestamp.type", "LogAppendTime")));
        }
        long before = System.currentTimeMillis();
        RecordMetadata m;
        try (KafkaProducer<String, String> p = Cluster.producer(Map.of(ProducerConfig.ACKS_CONFIG, "all"))) {
            m = p.send(new ProducerRecord<>(topic, 0, 1000L, "k", "v")).get();
        }
        long after = System.currentTimeMillis();
        assertTrue(m.timestamp() >= before - 1000 && m.timestamp() <= after + 1000,
                "acked timestamp is the broker's: " + m.timestamp());
        try (KafkaConsumer<String, String> c = Cluster.consumer(Map.of())) {
            TopicPartition tp = new TopicPartition(topic, 0);
            c.assign(List.of(tp));
            ConsumerRecord<String, String> r = Cluster.pollN(c, 1).get(0);
            assertEquals(TimestampType.LOG_APPEND_TIME, r.timestampType());
            assertEquals(m.timestamp(), r.timestamp());
        }
    }
}
