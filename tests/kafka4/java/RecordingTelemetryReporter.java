// A broker-side metrics reporter that receives clients' pushed metrics (KIP-714) and
// appends each payload to a file, one line per push:
//   <client instance id> <terminating> <content type> <base64 of the OTLP bytes>
// The file is the broker config "aiokafka.test.telemetry.file". Compiled by
// tests/kafka4/test_metrics_push_apache.py at session start against Kafka's jars.
//
// Kafka 4.4 has two entry points: ClientTelemetryExporterProvider (newer) and
// ClientTelemetry (older, deprecated); the reporter implements both and the broker
// calls whichever it uses. Lines marked "4.4+" are dropped by the test for releases
// without the newer interface (4.0).

import java.io.FileWriter;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.MetricsReporter;
import org.apache.kafka.server.telemetry.ClientTelemetry;
import org.apache.kafka.server.telemetry.ClientTelemetryExporter; // 4.4+
import org.apache.kafka.server.telemetry.ClientTelemetryExporterProvider; // 4.4+
import org.apache.kafka.server.telemetry.ClientTelemetryPayload;
import org.apache.kafka.server.telemetry.ClientTelemetryReceiver;

@SuppressWarnings("deprecation")
public class RecordingTelemetryReporter
        implements MetricsReporter, ClientTelemetry
        , ClientTelemetryExporterProvider // 4.4+
        {

    private volatile String path;

    @Override
    public void configure(Map<String, ?> configs) {
        Object p = configs.get("aiokafka.test.telemetry.file");
        path = p == null ? null : p.toString();
    }

    @Override
    public void init(List<KafkaMetric> metrics) {}

    @Override
    public void metricChange(KafkaMetric metric) {}

    @Override
    public void metricRemoval(KafkaMetric metric) {}

    @Override
    public void close() {}

    @Override
    public Set<String> reconfigurableConfigs() {
        return Set.of();
    }

    @Override
    public void reconfigure(Map<String, ?> configs) {}

    @Override
    public void validateReconfiguration(Map<String, ?> configs) {}

    private synchronized void record(ClientTelemetryPayload payload) {
        if (path == null) {
            return;
        }
        ByteBuffer data = payload.data().duplicate();
        byte[] bytes = new byte[data.remaining()];
        data.get(bytes);
        String line = payload.clientInstanceId() + " " + payload.isTerminating() + " "
                + payload.contentType() + " " + Base64.getEncoder().encodeToString(bytes) + "\n";
        try (FileWriter w = new FileWriter(path, true)) {
            w.write(line);
        } catch (IOException e) {
            throw new RuntimeException(e);
        }
    }

    @Override
    public ClientTelemetryReceiver clientReceiver() {
        return (context, payload) -> record(payload);
    }

    @Override // 4.4+
    public ClientTelemetryExporter clientTelemetryExporter() { // 4.4+
        return (context, payload) -> record(payload); // 4.4+
    } // 4.4+
}
