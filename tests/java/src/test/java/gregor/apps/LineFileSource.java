package gregor.apps;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.source.SourceConnector;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTask;

/**
 * A source connector of the lines of one file, in the manner of Kafka's FileStreamSource (whose
 * connect-file jar Maven Central does not serve here): config `file` and `topic`; each line is
 * a record with a string value, and its source offset is the byte position after the line, so a
 * restarted task (standalone: the offsets file; distributed: the offsets topic) resumes there.
 */
public class LineFileSource extends SourceConnector {
    static final ConfigDef CONFIG = new ConfigDef()
            .define("file", ConfigDef.Type.STRING, ConfigDef.Importance.HIGH, "the file to read")
            .define("topic", ConfigDef.Type.STRING, ConfigDef.Importance.HIGH, "the topic to write");

    private Map<String, String> props;

    @Override
    public void start(Map<String, String> props) {
        this.props = props;
    }

    @Override
    public Class<? extends Task> taskClass() {
        return LineTask.class;
    }

    @Override
    public List<Map<String, String>> taskConfigs(int maxTasks) {
        return List.of(props);
    }

    @Override
    public void stop() {}

    @Override
    public ConfigDef config() {
        return CONFIG;
    }

    @Override
    public String version() {
        return "1";
    }

    public static class LineTask extends SourceTask {
        private String file;
        private String topic;
        private long position;

        @Override
        public void start(Map<String, String> props) {
            file = props.get("file");
            topic = props.get("topic");
            Map<String, Object> stored = context.offsetStorageReader().offset(Map.of("file", file));
            position = stored == null ? 0 : ((Number) stored.get("position")).longValue();
        }

        @Override
        public List<SourceRecord> poll() throws InterruptedException {
            List<SourceRecord> out = new ArrayList<>();
            try (RandomAccessFile f = new RandomAccessFile(file, "r")) {
                f.seek(position);
                byte[] rest = new byte[(int) Math.min(f.length() - position, 1 << 20)];
                f.readFully(rest);
                int start = 0;
                for (int i = 0; i < rest.length && out.size() < 500; i++) {
                    if (rest[i] == '\n') {
                        String line = new String(rest, start, i - start, StandardCharsets.UTF_8);
                        position += i + 1 - start;
                        start = i + 1;
                        out.add(new SourceRecord(Map.of("file", file), Map.of("position", position), topic, null,
                                null, null, Schema.STRING_SCHEMA, line));
                    }
                }
            } catch (java.io.FileNotFoundException e) {
                // not there yet
            } catch (IOException e) {
                throw new ConnectException("reading " + file, e);
            }
            if (out.isEmpty()) {
                Thread.sleep(100);
                return null;
            }
            return out;
        }

        @Override
        public void stop() {}

        @Override
        public String version() {
            return "1";
        }
    }
}
