package gregor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.function.BooleanSupplier;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Gregor cluster the tests talk to: tests/e2e/test_java_clients.py starts a dev-cluster
 * and passes its bootstrap servers in GREGOR_BOOTSTRAP and its broker ids in GREGOR_BROKERS.
 */
final class Cluster {
    private Cluster() {}

    static String bootstrap() {
        String b = System.getenv("GREGOR_BOOTSTRAP");
        if (b == null || b.isEmpty()) {
            fail("GREGOR_BOOTSTRAP is not set: run these tests through tests/e2e/test_java_clients.py");
        }
        return b;
    }

    static List<Integer> brokerIds() {
        List<Integer> ids = new ArrayList<>();
        for (String s : System.getenv().getOrDefault("GREGOR_BROKERS", "1").split(",")) {
            ids.add(Integer.parseInt(s.trim()));
        }
        return ids;
    }

    static String unique(String prefix) {
        return prefix + "-" + UUID.randomUUID().toString().substring(0, 8);
    }

    static Admin admin() {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap());
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30000);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 20000);
        return Admin.create(p);
    }

    static KafkaProducer<String, String> producer(Map<String, Object> extra) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap());
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 30000);
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 20000);
        p.putAll(extra);
        return new KafkaProducer<>(p);
    }

    static KafkaConsumer<String, String> consumer(Map<String, Object> extra) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap());
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        p.putAll(extra);
        return new KafkaConsumer<>(p);
    }

    static void createTopic(Admin admin, String name, int partitions, short rf) throws Exception {
        createTopic(admin, new NewTopic(name, partitions, rf));
    }

    static void createTopic(Admin admin, NewTopic topic) throws Exception {
        admin.createTopics(List.of(topic)).all().get();
    }

    /** The value of a future, or the cause of its failure. */
    static <T> Throwable failure(KafkaFuture<T> f) throws InterruptedException {
        try {
            f.get();
        } catch (ExecutionException e) {
            return e.getCause();
        }
        return null;
    }

    /** Asserts that the future fails with exactly this exception class. */
    static void assertFailsWith(Class<? extends Throwable> cls, KafkaFuture<?> f) throws InterruptedException {
        Throwable t = failure(f);
        assertTrue(t != null, "expected " + cls.getSimpleName() + ", the call succeeded");
        assertEquals(cls, t.getClass(), "wrong error: " + t);
    }

    static void waitUntil(String what, Duration timeout, BooleanSupplier cond) throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (System.nanoTime() < deadline) {
            if (cond.getAsBoolean()) {
                return;
            }
            Thread.sleep(100);
        }
        fail("timed out after " + timeout + " waiting for " + what);
    }

    /** Polls until `count` records arrived (or 30 s passed). */
    static List<ConsumerRecord<String, String>> pollN(KafkaConsumer<String, String> c, int count) {
        List<ConsumerRecord<String, String>> out = new ArrayList<>();
        long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        while (out.size() < count && System.nanoTime() < deadline) {
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                out.add(r);
            }
        }
        assertEquals(count, out.size(), "records read back");
        return out;
    }

    static <T> List<T> sorted(Collection<T> items, java.util.Comparator<T> cmp) {
        List<T> l = new ArrayList<>(items);
        l.sort(cmp);
        return l;
    }
}
