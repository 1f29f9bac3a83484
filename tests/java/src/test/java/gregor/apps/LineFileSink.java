package gregor.apps;

import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.sink.SinkConnector;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.sink.SinkTask;

/**
 * A sink connector that appends each record's value as a line to one file, in the manner of
 * Kafka's FileStreamSink: config `file` (and Connect's own `topics`); the file is flushed before
 * Connect commits the consumer group's offsets.
 */
public class LineFileSink extends SinkConnector {
    static final ConfigDef CONFIG = new ConfigDef()
            .define("file", ConfigDef.Type.STRING, ConfigDef.Importance.HIGH, "the file to append to");

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

    public static class LineTask extends SinkTask {
        private OutputStream out;

        @Override
        public void start(Map<String, String> props) {
            try {
                out = new FileOutputStream(props.get("file"), true);
            } catch (IOException e) {
                throw new ConnectException(e);
            }
        }

        @Override
        public void put(Collection<SinkRecord> records) {
            try {
                for (SinkRecord r : records) {
                    out.write((r.value() + "\n").getBytes(StandardCharsets.UTF_8));
                }
            } catch (IOException e) {
                throw new ConnectException(e);
            }
        }

        @Override
        public void flush(Map<TopicPartition, OffsetAndMetadata> offsets) {
            try {
                out.flush();
            } catch (IOException e) {
                throw new ConnectException(e);
            }
        }

        @Override
        public void stop() {
            try {
                out.close();
            } catch (IOException e) {
                // closing
            }
        }

        @Override
        public String version() {
            return "1";
        }
    }
}
