// Generates key -> partition vectors with the Java client's default-partitioner
// arithmetic (32-bit MurmurHash2, seed 0x9747b28c, Java int overflow semantics,
// partition = (hash & 0x7fffffff) % count). Output: one line per key:
//   <hex key> <signed murmur2> <partition for each count in COUNTS>
// Run: javac -d /tmp Murmur2Vectors.java && java -cp /tmp Murmur2Vectors > murmur2_vectors.txt
import java.nio.charset.StandardCharsets;

public class Murmur2Vectors {
    static final int[] COUNTS = {1, 2, 3, 6, 7, 10, 12, 16, 100, 1000, 2147483647};

    static int murmur2(byte[] data) {
        int length = data.length;
        int m = 0x5bd1e995;
        int h = 0x9747b28c ^ length;
        int words = length / 4;
        for (int i = 0; i < words; i++) {
            int j = i * 4;
            int k = (data[j] & 0xff) | ((data[j + 1] & 0xff) << 8) | ((data[j + 2] & 0xff) << 16) | ((data[j + 3] & 0xff) << 24);
            k *= m;
            k ^= k >>> 24;
            k *= m;
            h *= m;
            h ^= k;
        }
        int rest = length % 4;
        int base = length - rest;
        if (rest == 3) h ^= (data[base + 2] & 0xff) << 16;
        if (rest >= 2) h ^= (data[base + 1] & 0xff) << 8;
        if (rest >= 1) {
            h ^= data[base] & 0xff;
            h *= m;
        }
        h ^= h >>> 13;
        h *= m;
        h ^= h >>> 15;
        return h;
    }

    static String hex(byte[] b) {
        StringBuilder sb = new StringBuilder();
        for (byte x : b) sb.append(String.format("%02x", x & 0xff));
        return sb.length() == 0 ? "-" : sb.toString();
    }

    static void emit(byte[] key) {
        int h = murmur2(key);
        StringBuilder sb = new StringBuilder(hex(key)).append(' ').append(h);
        for (int n : COUNTS) sb.append(' ').append((h & 0x7fffffff) % n);
        System.out.println(sb);
    }

    public static void main(String[] args) {
        String[] words = {"", "a", "ab", "abc", "abcd", "abcde", "21", "foobar", "key-0", "key-1",
            "user-12345", "order:2024-01-01:000001", "h\u00e9llo w\u00f6rld", "\u65e5\u672c\u8a9e\u30ad\u30fc",
            "a-little-bit-long-string", "a-little-bit-longer-string", "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"};
        for (String w : words) emit(w.getBytes(StandardCharsets.UTF_8));
        for (int i = 0; i < 200; i++) emit(("key-" + i).getBytes(StandardCharsets.UTF_8));
        long seed = 42;
        for (int i = 0; i < 200; i++) {
            int len = i % 37;
            byte[] b = new byte[len];
            for (int j = 0; j < len; j++) {
                seed = (seed * 6364136223846793005L + 1442695040888963407L);
                b[j] = (byte) (seed >>> 56);
            }
            emit(b);
        }
    }
}
