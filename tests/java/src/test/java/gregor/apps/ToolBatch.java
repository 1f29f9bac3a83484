package gregor.apps;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import org.apache.kafka.common.utils.internals.Exit;

/**
 * Runs several of Kafka's command-line tools in one JVM (one start instead of one per tool),
 * for tests/e2e/test_kafka_tools_match.py, which compares their output with gregor's.
 *
 * <p>Usage: ToolBatch COMMANDS OUTPUT. COMMANDS has one tool run per line: the main class and
 * its arguments, tab-separated. OUTPUT gets, for each run, a line "=== N EXIT CODE" and then
 * what the tool printed to stdout.
 */
public final class ToolBatch {
    private ToolBatch() {}

    static final class Exited extends RuntimeException {
        final int code;

        Exited(int code) {
            super("exit " + code, null, false, false);
            this.code = code;
        }
    }

    public static void main(String[] args) throws Exception {
        List<String> commands = Files.readAllLines(Path.of(args[0]), StandardCharsets.UTF_8);
        StringBuilder report = new StringBuilder();
        PrintStream out = System.out;
        // A tool may call Exit.exit inside a try whose catch then exits again with 1 (e.g.
        // TopicCommand): the first exit is the tool's answer.
        int[] first = {Integer.MIN_VALUE};
        Exit.setExitProcedure((status, message) -> {
            if (first[0] == Integer.MIN_VALUE) {
                first[0] = status;
            }
            throw new Exited(status);
        });
        int n = 0;
        for (String command : commands) {
            if (command.isBlank()) {
                continue;
            }
            String[] parts = command.split("\t");
            ByteArrayOutputStream captured = new ByteArrayOutputStream();
            int code = 0;
            first[0] = Integer.MIN_VALUE;
            System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
            try {
                Class.forName(parts[0]).getMethod("main", String[].class)
                        .invoke(null, (Object) Arrays.copyOfRange(parts, 1, parts.length));
            } catch (InvocationTargetException e) {
                if (e.getCause() instanceof Exited x) {
                    code = first[0] != Integer.MIN_VALUE ? first[0] : x.code;
                } else {
                    e.getCause().printStackTrace();
                    code = -1;
                }
            } finally {
                System.out.flush();
                System.setOut(out);
            }
            report.append("=== ").append(n++).append(" EXIT ").append(code).append('\n')
                    .append(captured.toString(StandardCharsets.UTF_8));
        }
        Files.writeString(Path.of(args[1]), report.toString(), StandardCharsets.UTF_8);
        Exit.resetExitProcedure();
        System.exit(0);
    }
}
