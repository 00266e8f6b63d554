// A tiny Kafka Streams application for tests/kafka4/test_streams_groups_apache.py: it joins
// a streams group (group.protocol=streams, KIP-1071) and counts records per key, so its
// topology has two subtopologies joined by a repartition topic (selectKey + groupByKey)
// and a changelog topic (the in-memory count store, so no RocksDB is needed).
//
// Usage: java -cp <kafka jars>:<kafka-streams jar>:<classes> StreamsGroupApp
//        <bootstrap> <application.id> <input topic> <output topic>
// Prints "RUNNING" once the instance is running;
// it closes (leaving the group) when its standard input closes.
import java.io.InputStream;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.Stores;

public final class StreamsGroupApp {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        props.put(StreamsConfig.CLIENT_ID_CONFIG, args[1] + "-client");
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        props.put(StreamsConfig.STATE_DIR_CONFIG, System.getProperty("java.io.tmpdir") + "/streams-" + args[1]);

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(args[2], Consumed.with(Serdes.String(), Serdes.String()))
            .selectKey((k, v) -> v)
            .groupByKey()
            .count(Materialized.as(Stores.inMemoryKeyValueStore("counts")))
            .toStream()
            .to(args[3], Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch running = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.RUNNING) {
                running.countDown();
            }
        });
        streams.start();
        running.await();
        System.out.println("RUNNING");
        System.out.flush();
        InputStream in = System.in;
        while (in.read() != -1) {
            // Wait for the test to close our standard input.
        }
        streams.close();
        System.out.println("CLOSED");
        System.out.flush();
    }
}
