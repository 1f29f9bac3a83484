package gregor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.utils.internals.Exit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Kafka's own command-line tools (their main classes in the kafka-tools jar, what the
 * kafka-*.sh scripts run) pointed at Gregor: each exits 0 with Kafka's output.
 */
@Timeout(120)
class KafkaToolsTest {
    record Run(int exitCode, String out, String err) {
        String all() {
            return out + err;
        }
    }

    /** Exit.exit from inside a tool: carries the code out of its main. */
    static final class Exited extends RuntimeException {
        final int code;

        Exited(int code) {
            super("exit " + code, null, false, false);
            this.code = code;
        }
    }

    /** Runs a tool's main in this JVM, its output captured and Exit.exit turned into a code. */
    static synchronized Run tool(String mainClass, String... args) {
        PrintStream out = System.out;
        PrintStream err = System.err;
        ByteArrayOutputStream o = new ByteArrayOutputStream();
        ByteArrayOutputStream e = new ByteArrayOutputStream();
        int code = 0;
        // A tool may call Exit.exit inside a try whose catch then exits again with 1 (e.g.
        // TopicCommand): the first exit is the tool's answer.
        int[] first = {Integer.MIN_VALUE};
        Exit.setExitProcedure((status, message) -> {
            if (first[0] == Integer.MIN_VALUE) {
                first[0] = status;
            }
            throw new Exited(status);
        });
        try {
            System.setOut(new PrintStream(o, true, StandardCharsets.UTF_8));
            System.setErr(new PrintStream(e, true, StandardCharsets.UTF_8));
            Class.forName(mainClass).getMethod("main", String[].class).invoke(null, (Object) args);
        } catch (InvocationTargetException x) {
            Throwable cause = x.getCause();
            if (cause instanceof Exited ex) {
                code = first[0] != Integer.MIN_VALUE ? first[0] : ex.code;
            } else {
                cause.printStackTrace(System.err);
                code = -1;
            }
        } catch (ReflectiveOperationException x) {
            throw new AssertionError(mainClass + " failed to run", x);
        } finally {
            System.out.flush();
            System.err.flush();
            System.setOut(out);
            System.setErr(err);
            Exit.resetExitProcedure();
        }
        return new Run(code, o.toString(StandardCharsets.UTF_8), e.toString(StandardCharsets.UTF_8));
    }

    static Run ok(String mainClass, String... args) {
        Run r = tool(mainClass, args);
        assertEquals(0, r.exitCode, mainClass + " " + String.join(" ", args) + "\nout: " + r.out + "\nerr: " + r.err);
        return r;
    }

    static final String BS = "--bootstrap-server";

    static void produce(String topic, int count) throws Exception {
        try (KafkaProducer<String, String> p = Cluster.producer(Map.of("acks", "all"))) {
            for (int i = 0; i < count; i++) {
                p.send(new ProducerRecord<>(topic, i % 2, "k" + i, "v" + i));
            }
            p.flush();
        }
    }

    @Test
    void consumerGroupsGetOffsetsDeleteRecords() throws Exception {
        String topic = Cluster.unique("tools-groups");
        String group = Cluster.unique("tools-group");
        try (Admin admin = Cluster.admin()) {
            Cluster.createTopic(admin, topic, 2, (short) 2);
        }
        produce(topic, 20);
        try (KafkaConsumer<String, String> c = Cluster.consumer(Map.of("group.id", group))) {
            c.subscribe(List.of(topic));
            Cluster.pollN(c, 20);
            c.commitSync(Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(10),
                    new TopicPartition(topic, 1), new OffsetAndMetadata(4)));
        }

        // kafka-get-offsets: TOPIC:PARTITION:OFFSET lines.
        String latest = ok("org.apache.kafka.tools.GetOffsetShell", BS, Cluster.bootstrap(), "--topic", topic).out;
        assertEquals(List.of(topic + ":0:10", topic + ":1:10"), sortedLines(latest));
        String earliest = ok("org.apache.kafka.tools.GetOffsetShell", BS, Cluster.bootstrap(), "--topic", topic,
                "--time", "-2").out;
        assertEquals(List.of(topic + ":0:0", topic + ":1:0"), sortedLines(earliest));

        // kafka-consumer-groups: list, describe (lag), reset, delete.
        String listed = ok("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", BS, Cluster.bootstrap(),
                "--list").out;
        assertTrue(sortedLines(listed).contains(group), listed);
        String described = ok("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", BS,
                Cluster.bootstrap(), "--describe", "--group", group).all();
        assertTrue(described.contains("Consumer group '" + group + "' has no active members."), described);
        Matcher row = Pattern.compile("(?m)^" + Pattern.quote(group) + "\\s+" + Pattern.quote(topic)
                + "\\s+1\\s+4\\s+10\\s+6\\s").matcher(described);
        assertTrue(row.find(), "GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG row:\n" + described);
        String reset = ok("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", BS, Cluster.bootstrap(),
                "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute").out;
        assertTrue(Pattern.compile("(?m)^" + Pattern.quote(group) + "\\s+" + Pattern.quote(topic) + "\\s+0\\s+0\\s*$")
                .matcher(reset).find(), reset);

        // kafka-delete-records: partition 0 below offset 3.
        Path json = Files.createTempFile("delete-records", ".json");
        Files.writeString(json, "{\"partitions\":[{\"topic\":\"" + topic + "\",\"partition\":0,\"offset\":3}],\"version\":1}");
        String deleted = ok("org.apache.kafka.tools.DeleteRecordsCommand", BS, Cluster.bootstrap(),
                "--offset-json-file", json.toString()).out;
        assertTrue(deleted.contains("partition: " + topic + "-0\tlow_watermark: 3"), deleted);
        String after = ok("org.apache.kafka.tools.GetOffsetShell", BS, Cluster.bootstrap(), "--topic", topic,
                "--time", "-2").out;
        assertEquals(List.of(topic + ":0:3", topic + ":1:0"), sortedLines(after));

        String gone = ok("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", BS, Cluster.bootstrap(),
                "--delete", "--group", group).out;
        assertTrue(gone.contains("Deletion of requested consumer groups ('" + group + "') was successful."), gone);
    }

    @Test
    void configsAclsLogDirsLeaderElection() throws Exception {
        String topic = Cluster.unique("tools-configs");
        try (Admin admin = Cluster.admin()) {
            Cluster.createTopic(admin, topic, 2, (short) 2);
        }
        // kafka-configs
        String altered = ok("org.apache.kafka.tools.ConfigCommand", BS, Cluster.bootstrap(), "--entity-type",
                "topics", "--entity-name", topic, "--alter", "--add-config", "retention.ms=7200000,max.message.bytes=65536").out;
        assertTrue(altered.contains("Completed updating config for topic " + topic + "."), altered);
        String described = ok("org.apache.kafka.tools.ConfigCommand", BS, Cluster.bootstrap(), "--entity-type",
                "topics", "--entity-name", topic, "--describe").out;
        assertTrue(described.contains("Dynamic configs for topic " + topic + " are:"), described);
        assertTrue(described.contains("retention.ms=7200000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=7200000"),
                described);
        ok("org.apache.kafka.tools.ConfigCommand", BS, Cluster.bootstrap(), "--entity-type", "topics",
                "--entity-name", topic, "--alter", "--delete-config", "max.message.bytes");
        String after = ok("org.apache.kafka.tools.ConfigCommand", BS, Cluster.bootstrap(), "--entity-type",
                "topics", "--entity-name", topic, "--describe").out;
        assertTrue(!after.contains("max.message.bytes="), after);
        String brokers = ok("org.apache.kafka.tools.ConfigCommand", BS, Cluster.bootstrap(), "--entity-type",
                "brokers", "--entity-name", String.valueOf(Cluster.brokerIds().get(0)), "--describe", "--all").out;
        assertTrue(brokers.contains("All configs for broker " + Cluster.brokerIds().get(0) + " are:"), brokers);
        // Gregor lists fewer broker keys than Kafka (docs/differences-from-kafka.md).
        assertTrue(brokers.contains("log.retention.ms=604800000 sensitive=false"), brokers);

        // kafka-acls
        String added = ok("org.apache.kafka.tools.AclCommand", BS, Cluster.bootstrap(), "--add",
                "--allow-principal", "User:alice", "--operation", "Read", "--topic", topic).out;
        assertTrue(added.contains("Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=" + topic
                + ", patternType=LITERAL)`:"), added);
        String listed = ok("org.apache.kafka.tools.AclCommand", BS, Cluster.bootstrap(), "--list", "--topic", topic).out;
        assertTrue(listed.contains("(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"), listed);
        ok("org.apache.kafka.tools.AclCommand", BS, Cluster.bootstrap(), "--remove", "--force",
                "--allow-principal", "User:alice", "--operation", "Read", "--topic", topic);
        String none = ok("org.apache.kafka.tools.AclCommand", BS, Cluster.bootstrap(), "--list", "--topic", topic).out;
        assertTrue(!none.contains("User:alice"), none);

        // kafka-log-dirs: a JSON line with every broker and the topic's replicas.
        produce(topic, 10);
        String dirs = ok("org.apache.kafka.tools.LogDirsCommand", BS, Cluster.bootstrap(), "--describe",
                "--topic-list", topic).out;
        String jsonLine = Arrays.stream(dirs.split("\n")).filter(l -> l.startsWith("{")).findFirst().orElse("");
        assertTrue(jsonLine.startsWith("{\"brokers\":[") && jsonLine.contains("\"partition\":\"" + topic + "-0\""), dirs);
        assertEquals(4, countOf(jsonLine, "\"partition\":\"" + topic + "-"), "replicas in " + jsonLine);

        // kafka-leader-election: the preferred leaders already lead.
        String elected = ok("org.apache.kafka.tools.LeaderElectionCommand", BS, Cluster.bootstrap(),
                "--election-type", "preferred", "--topic", topic, "--partition", "0").all();
        assertTrue(elected.contains("Valid replica already elected for partitions " + topic + "-0"), elected);
    }

    @Test
    void reassignPartitions() throws Exception {
        String topic = Cluster.unique("tools-reassign");
        List<Integer> ids = Cluster.brokerIds();
        try (Admin admin = Cluster.admin()) {
            Cluster.createTopic(admin, new org.apache.kafka.clients.admin.NewTopic(topic,
                    Map.of(0, List.of(ids.get(0), ids.get(1)))));
        }
        produce1(topic, 20);
        String main = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand";
        Path move = Files.createTempFile("move", ".json");
        Files.writeString(move, "{\"topics\":[{\"topic\":\"" + topic + "\"}],\"version\":1}");
        String generated = ok(main, BS, Cluster.bootstrap(), "--topics-to-move-json-file", move.toString(),
                "--broker-list", ids.get(1) + "," + ids.get(2), "--generate").out;
        assertTrue(generated.contains("Current partition replica assignment"), generated);
        assertTrue(generated.contains("Proposed partition reassignment configuration"), generated);
        assertTrue(generated.contains("{\"topic\":\"" + topic + "\",\"partition\":0,\"replicas\":[" + ids.get(0) + ","
                + ids.get(1) + "]"), generated);

        Path plan = Files.createTempFile("plan", ".json");
        Files.writeString(plan, "{\"version\":1,\"partitions\":[{\"topic\":\"" + topic
                + "\",\"partition\":0,\"replicas\":[" + ids.get(2) + "," + ids.get(1) + "]}]}");
        String executed = ok(main, BS, Cluster.bootstrap(), "--reassignment-json-file", plan.toString(), "--execute").out;
        assertTrue(executed.contains("Successfully started partition reassignment for " + topic + "-0"), executed);
        Cluster.waitUntil("the reassignment completed", java.time.Duration.ofSeconds(60), () -> ok(main, BS,
                Cluster.bootstrap(), "--reassignment-json-file", plan.toString(), "--verify").out
                .contains("Reassignment of partition " + topic + "-0 is completed."));
        try (Admin admin = Cluster.admin()) {
            var p0 = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().get(0);
            assertEquals(List.of(ids.get(2), ids.get(1)), p0.replicas().stream().map(n -> n.id()).toList());
        }
        String offsets = ok("org.apache.kafka.tools.GetOffsetShell", BS, Cluster.bootstrap(), "--topic", topic).out;
        assertEquals(List.of(topic + ":0:20"), sortedLines(offsets));
    }

    static void produce1(String topic, int count) throws Exception {
        try (KafkaProducer<String, String> p = Cluster.producer(Map.of("acks", "all"))) {
            for (int i = 0; i < count; i++) {
                p.send(new ProducerRecord<>(topic, 0, "k" + i, "v" + i));
            }
            p.flush();
        }
    }

    @Test
    void perfTests() throws Exception {
        String topic = Cluster.unique("tools-perf");
        try (Admin admin = Cluster.admin()) {
            Cluster.createTopic(admin, topic, 2, (short) 2);
        }
        String produced = ok("org.apache.kafka.tools.ProducerPerformance", "--topic", topic, "--num-records", "5000",
                "--record-size", "100", "--throughput", "-1", "--producer-props",
                "bootstrap.servers=" + Cluster.bootstrap(), "acks=all").out;
        // The closing summary: "5000 records sent, ... 50th, ... 99th ...".
        assertTrue(Pattern.compile("(?m)^5000 records sent, [0-9.]+ records/sec \\([0-9.]+ MB/sec\\), [0-9.]+ ms avg latency, "
                + "[0-9.]+ ms max latency, \\d+ ms 50th, \\d+ ms 95th, \\d+ ms 99th, \\d+ ms 99.9th.").matcher(produced).find(),
                produced);
        String consumed = ok("org.apache.kafka.tools.ConsumerPerformance", BS, Cluster.bootstrap(), "--topic", topic,
                "--num-records", "5000", "--timeout", "30000").out;
        List<String> rows = Arrays.stream(consumed.split("\n")).filter(l -> !l.isBlank()).toList();
        assertTrue(rows.get(0).startsWith("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg"),
                consumed);
        String[] fields = rows.get(1).split(",\\s*");
        assertEquals("5000", fields[4], consumed);
        assertEquals(0.4768, Double.parseDouble(fields[2]), 0.001, consumed);
    }

    static List<String> sortedLines(String s) {
        List<String> l = new ArrayList<>(Arrays.stream(s.split("\n")).map(String::trim).filter(x -> !x.isEmpty()).toList());
        l.sort(null);
        return l;
    }

    static int countOf(String s, String needle) {
        int n = 0;
        for (int i = s.indexOf(needle); i >= 0; i = s.indexOf(needle, i + 1)) {
            n++;
        }
        return n;
    }
}
