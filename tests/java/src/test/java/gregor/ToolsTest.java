package gregor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Collectors;
import org.apache.kafka.common.utils.internals.Exit;
import org.apache.kafka.tools.TopicCommand;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Kafka's own kafka-topics.sh (TopicCommand, from the kafka-tools jar) pointed at Gregor. */
@Timeout(90)
class ToolsTest {
    record Run(int exitCode, String out, String err) {}

    /** Runs the tool in this JVM and returns its exit code and output. */
    static synchronized Run kafkaTopics(String... args) {
        PrintStream out = System.out;
        PrintStream err = System.err;
        ByteArrayOutputStream o = new ByteArrayOutputStream();
        ByteArrayOutputStream e = new ByteArrayOutputStream();
        int code = 0;
        // TopicCommand.execute ends with Exit.exit(code): record the code instead of exiting.
        int[] exited = {-1};
        Exit.setExitProcedure((status, message) -> exited[0] = status);
        try {
            System.setOut(new PrintStream(o, true, StandardCharsets.UTF_8));
            System.setErr(new PrintStream(e, true, StandardCharsets.UTF_8));
            String[] full = new String[args.length + 2];
            full[0] = "--bootstrap-server";
            full[1] = Cluster.bootstrap();
            System.arraycopy(args, 0, full, 2, args.length);
            // main is mainNoExit followed by Exit.exit; call the former for the exit code.
            java.lang.reflect.Method m = TopicCommand.class.getDeclaredMethod("mainNoExit", String[].class);
            m.setAccessible(true);
            code = (Integer) m.invoke(null, (Object) full);
            if (code == 0 && exited[0] != -1) {
                code = exited[0];
            }
        } catch (ReflectiveOperationException x) {
            throw new AssertionError("kafka-topics failed to run", x);
        } finally {
            System.setOut(out);
            System.setErr(err);
            Exit.resetExitProcedure();
        }
        return new Run(code, o.toString(StandardCharsets.UTF_8), e.toString(StandardCharsets.UTF_8));
    }

    static Run ok(String... args) {
        Run r = kafkaTopics(args);
        assertEquals(0, r.exitCode, "kafka-topics " + String.join(" ", args) + "\nout: " + r.out + "\nerr: " + r.err);
        return r;
    }

    @Test
    void kafkaTopicsCreateListDescribeAlterDelete() throws Exception {
        String topic = Cluster.unique("java-kafka-topics");
        Run created = ok("--create", "--topic", topic, "--partitions", "3", "--replication-factor", "2",
                "--config", "retention.ms=86400000");
        assertEquals("Created topic " + topic + ".", created.out.trim());

        // Again: refused, with Kafka's message.
        Run again = kafkaTopics("--create", "--topic", topic, "--partitions", "1", "--replication-factor", "1");
        assertEquals(1, again.exitCode);
        assertTrue(again.out.contains("Topic '" + topic + "' already exists."), again.out + again.err);

        List<String> listed = Arrays.asList(ok("--list").out.split("\n"));
        assertTrue(listed.contains(topic), "listed: " + listed);

        String described = ok("--describe", "--topic", topic).out;
        List<String> lines = Arrays.stream(described.split("\n")).filter(l -> !l.isBlank())
                .collect(Collectors.toList());
        assertEquals(4, lines.size(), described);
        String head = lines.get(0);
        assertTrue(head.startsWith("Topic: " + topic + "\tTopicId: "), head);
        assertTrue(head.contains("\tPartitionCount: 3\tReplicationFactor: 2\tConfigs: "), head);
        assertTrue(head.contains("retention.ms=86400000"), head);
        for (int p = 0; p < 3; p++) {
            String line = lines.get(p + 1);
            assertTrue(line.startsWith("\tTopic: " + topic + "\tPartition: " + p + "\tLeader: "), line);
            String[] fields = line.trim().split("\t");
            String leader = fields[2].substring("Leader: ".length());
            String replicas = fields[3].substring("Replicas: ".length());
            String isr = fields[4].substring("Isr: ".length());
            assertEquals(2, replicas.split(",").length, line);
            assertEquals(replicas.split(",")[0], leader, line);
            assertEquals(replicas, isr, line);
        }

        ok("--alter", "--topic", topic, "--partitions", "5");
        String after = ok("--describe", "--topic", topic).out;
        assertTrue(after.contains("\tPartitionCount: 5\t"), after);

        ok("--delete", "--topic", topic);
        Cluster.waitUntil("the topic gone", java.time.Duration.ofSeconds(20),
                () -> !Arrays.asList(kafkaTopics("--list").out.split("\n")).contains(topic));
        Run missing = kafkaTopics("--describe", "--topic", topic);
        assertEquals(1, missing.exitCode);
        assertTrue((missing.out + missing.err).contains("Topic '" + topic + "' does not exist"),
                missing.out + missing.err);
    }
}
