// Test peer: builds and reads Kafka record batches with the real Java client
// (kafka-clients' MemoryRecords), so the Python tests can check kafkawire
// against it in both directions.  Driven by files so one JVM start serves many
// cases (JVM start-up dominates the cost of these tests).
//
// Usage:
//   build SPEC OUTDIR      build the batches described in SPEC, one file each
//   read FILE...           print one JSON line per FILE describing its batches
//   downconvert MAGIC FIRST_OFFSET IN OUT [IN OUT]...
//                          MemoryRecords.downConvert of each IN into its OUT;
//                          prints "ok OUT" or "error IN <exception>" per pair
//
// SPEC is line based, tokens separated by single spaces.  Byte strings are
// written as "-" (null) or "x" followed by hex digits ("x" alone is empty).
//   batch NAME MAGIC CODEC TSTYPE BASE_OFFSET LOG_APPEND_TIME PID PEPOCH BASESEQ TXN CONTROL LEADER_EPOCH
//   record OFFSET TIMESTAMP KEY VALUE [HKEY HVALUE]...
//   marker OFFSET TIMESTAMP COMMIT|ABORT COORDINATOR_EPOCH
//   end
// CODEC is none|gzip|snappy|lz4|zstd, TSTYPE is CREATE_TIME|LOG_APPEND_TIME,
// TXN and CONTROL are true|false.  Header keys are hex-encoded UTF-8.

import java.io.BufferedReader;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;

import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.CompressionType;
import org.apache.kafka.common.record.ControlRecordType;
import org.apache.kafka.common.record.ConvertedRecords;
import org.apache.kafka.common.record.EndTransactionMarker;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.MemoryRecordsBuilder;
import org.apache.kafka.common.record.MutableRecordBatch;
import org.apache.kafka.common.record.Record;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.utils.Time;

public final class KafkaRecordsTool {

    public static void main(String[] args) throws Exception {
        if (args.length == 0) {
            usage();
        }
        switch (args[0]) {
            case "build":
                if (args.length != 3) usage();
                build(Paths.get(args[1]), Paths.get(args[2]));
                break;
            case "read":
                StringBuilder out = new StringBuilder();
                for (int i = 1; i < args.length; i++) {
                    out.append(describeFile(Paths.get(args[i]))).append('\n');
                }
                System.out.print(out);
                System.out.flush();
                break;
            case "downconvert":
                if (args.length < 5 || (args.length - 3) % 2 != 0) usage();
                StringBuilder report = new StringBuilder();
                for (int i = 3; i < args.length; i += 2) {
                    try {
                        downConvert(Byte.parseByte(args[1]), Long.parseLong(args[2]),
                                Paths.get(args[i]), Paths.get(args[i + 1]));
                        report.append("ok ").append(args[i + 1]).append('\n');
                    } catch (RuntimeException e) {
                        report.append("error ").append(args[i]).append(' ')
                                .append(e.toString().replace('\n', ' ')).append('\n');
                    }
                }
                System.out.print(report);
                System.out.flush();
                break;
            default:
                usage();
        }
    }

    private static void usage() {
        System.err.println("usage: build SPEC OUTDIR | read FILE... | downconvert MAGIC FIRST_OFFSET IN OUT [IN OUT]...");
        System.exit(2);
    }

    // ---------------------------------------------------------------- build

    private static Compression compression(String name) {
        switch (name) {
            case "none": return Compression.NONE;
            case "gzip": return Compression.gzip().build();
            case "snappy": return Compression.snappy().build();
            case "lz4": return Compression.lz4().build();
            case "zstd": return Compression.zstd().build();
            default: throw new IllegalArgumentException("unknown codec " + name);
        }
    }

    private static byte[] bytesOrNull(String token) {
        if (token.equals("-")) return null;
        if (!token.startsWith("x")) throw new IllegalArgumentException("bad byte string " + token);
        String hex = token.substring(1);
        byte[] out = new byte[hex.length() / 2];
        for (int i = 0; i < out.length; i++) {
            out[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
        }
        return out;
    }

    private static void build(Path spec, Path outDir) throws IOException {
        Files.createDirectories(outDir);
        MemoryRecordsBuilder builder = null;
        String name = null;
        try (BufferedReader reader = Files.newBufferedReader(spec, StandardCharsets.UTF_8)) {
            String line;
            while ((line = reader.readLine()) != null) {
                if (line.isEmpty()) continue;
                String[] t = line.split(" ", -1);
                switch (t[0]) {
                    case "batch": {
                        name = t[1];
                        byte magic = Byte.parseByte(t[2]);
                        ByteBuffer buffer = ByteBuffer.allocate(1024);
                        builder = MemoryRecords.builder(buffer, magic, compression(t[3]),
                                TimestampType.valueOf(t[4]), Long.parseLong(t[5]), Long.parseLong(t[6]),
                                Long.parseLong(t[7]), Short.parseShort(t[8]), Integer.parseInt(t[9]),
                                Boolean.parseBoolean(t[10]), Boolean.parseBoolean(t[11]),
                                Integer.parseInt(t[12]));
                        break;
                    }
                    case "record": {
                        int headerTokens = t.length - 5;
                        if (headerTokens % 2 != 0) throw new IllegalArgumentException("odd header tokens: " + line);
                        Header[] headers = new Header[headerTokens / 2];
                        for (int i = 0; i < headers.length; i++) {
                            String key = new String(bytesOrNull(t[5 + 2 * i]), StandardCharsets.UTF_8);
                            headers[i] = new RecordHeader(key, bytesOrNull(t[6 + 2 * i]));
                        }
                        builder.appendWithOffset(Long.parseLong(t[1]), Long.parseLong(t[2]),
                                bytesOrNull(t[3]), bytesOrNull(t[4]), headers);
                        break;
                    }
                    case "marker": {
                        EndTransactionMarker marker = new EndTransactionMarker(
                                ControlRecordType.valueOf(t[3]), Integer.parseInt(t[4]));
                        builder.appendEndTxnMarker(Long.parseLong(t[2]), marker);
                        break;
                    }
                    case "end": {
                        MemoryRecords records = builder.build();
                        writeAll(records.buffer(), outDir.resolve(name + ".bin"));
                        builder = null;
                        break;
                    }
                    default:
                        throw new IllegalArgumentException("bad spec line: " + line);
                }
            }
        }
    }

    private static void writeAll(ByteBuffer buffer, Path path) throws IOException {
        ByteBuffer dup = buffer.duplicate();
        byte[] bytes = new byte[dup.remaining()];
        dup.get(bytes);
        Files.write(path, bytes);
    }

    // -------------------------------------------------------- down-convert

    private static void downConvert(byte magic, long firstOffset, Path in, Path out) throws IOException {
        MemoryRecords records = MemoryRecords.readableRecords(ByteBuffer.wrap(Files.readAllBytes(in)));
        ConvertedRecords<MemoryRecords> converted = records.downConvert(magic, firstOffset, Time.SYSTEM);
        writeAll(converted.records().buffer(), out);
    }

    // ----------------------------------------------------------------- read

    private static String describeFile(Path path) throws IOException {
        byte[] bytes = Files.readAllBytes(path);
        MemoryRecords records = MemoryRecords.readableRecords(ByteBuffer.wrap(bytes));
        Json j = new Json();
        j.open('{').key("file").str(path.getFileName().toString());
        j.key("validBytes").num(records.validBytes());
        j.key("batches").open('[');
        try {
            for (MutableRecordBatch batch : records.batches()) {
                Json b = new Json();
                try {
                    describeBatch(b, batch);
                    j.raw(b.toString());
                } catch (RuntimeException e) {
                    j.open('{').key("batchError").str(e.toString()).close('}');
                }
            }
        } catch (RuntimeException e) {
            // A batch iterator error (bad length, bad magic) ends the list; the
            // test decides whether that was expected.
            j.open('{').key("iterationError").str(e.toString()).close('}');
        }
        j.close(']').close('}');
        return j.toString();
    }

    private static void describeBatch(Json j, MutableRecordBatch batch) {
        j.open('{');
        j.key("magic").num(batch.magic());
        j.key("baseOffset").num(batch.baseOffset());
        j.key("lastOffset").num(batch.lastOffset());
        j.key("nextOffset").num(batch.nextOffset());
        j.key("sizeInBytes").num(batch.sizeInBytes());
        j.key("checksum").num(batch.checksum());
        j.key("isValid").bool(batch.isValid());
        j.key("compression").str(batch.compressionType().name);
        j.key("timestampType").str(batch.timestampType().name());
        j.key("maxTimestamp").num(batch.maxTimestamp());
        j.key("partitionLeaderEpoch").num(batch.partitionLeaderEpoch());
        j.key("producerId").num(batch.producerId());
        j.key("producerEpoch").num(batch.producerEpoch());
        j.key("baseSequence").num(batch.baseSequence());
        j.key("lastSequence").num(batch.lastSequence());
        j.key("isTransactional").bool(batch.isTransactional());
        j.key("isControlBatch").bool(batch.isControlBatch());
        Integer count = batch.countOrNull();
        j.key("count");
        if (count == null) j.raw("null"); else j.num(count);
        j.key("deleteHorizonMs");
        if (batch.deleteHorizonMs().isPresent()) j.num(batch.deleteHorizonMs().getAsLong()); else j.raw("null");
        j.key("records").open('[');
        try {
            for (Record record : batch) {
                // Each record is rendered on its own so that an exception
                // half-way leaves well-formed JSON.
                j.raw(describeRecord(batch, record));
            }
        } catch (RuntimeException e) {
            j.open('{').key("recordError").str(e.toString()).close('}');
        }
        j.close(']');
        j.close('}');
    }

    private static String describeRecord(MutableRecordBatch batch, Record record) {
        Json j = new Json();
        j.open('{');
        j.key("offset").num(record.offset());
        j.key("timestamp").num(record.timestamp());
        j.key("key").bytes(record.key());
        j.key("value").bytes(record.value());
        j.key("headers").open('[');
        for (Header header : record.headers()) {
            j.open('[').str(header.key()).bytes(header.value() == null ? null : ByteBuffer.wrap(header.value())).close(']');
        }
        j.close(']');
        if (batch.isControlBatch()) {
            ControlRecordType type = ControlRecordType.parse(record.key());
            j.key("controlType").str(type.name());
            if (type == ControlRecordType.COMMIT || type == ControlRecordType.ABORT) {
                EndTransactionMarker marker = EndTransactionMarker.deserialize(record);
                j.key("coordinatorEpoch").num(marker.coordinatorEpoch());
            }
        }
        j.close('}');
        return j.toString();
    }

    /** Just enough of a JSON writer for the description above. */
    private static final class Json {
        private static final char[] HEX = "0123456789abcdef".toCharArray();
        private final StringBuilder sb = new StringBuilder();
        private boolean needComma = false;

        private void sep() {
            if (needComma) sb.append(',');
            needComma = true;
        }

        Json open(char c) { sep(); sb.append(c); needComma = false; return this; }
        Json close(char c) { sb.append(c); needComma = true; return this; }
        Json key(String k) { sep(); quote(k); sb.append(':'); needComma = false; return this; }
        Json num(long v) { sep(); sb.append(v); return this; }
        Json bool(boolean v) { sep(); sb.append(v); return this; }
        Json raw(String v) { sep(); sb.append(v); return this; }
        Json str(String v) { sep(); quote(v); return this; }

        Json bytes(ByteBuffer b) {
            sep();
            if (b == null) {
                sb.append("null");
                return this;
            }
            ByteBuffer d = b.duplicate();
            sb.append('"');
            while (d.hasRemaining()) {
                int v = d.get() & 0xff;
                sb.append(HEX[v >> 4]).append(HEX[v & 15]);
            }
            sb.append('"');
            return this;
        }

        private void quote(String s) {
            sb.append('"');
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
                if (c == '"' || c == '\\') sb.append('\\').append(c);
                else if (c < 0x20 || c > 0x7e) sb.append(String.format("\\u%04x", (int) c));
                else sb.append(c);
            }
            sb.append('"');
        }

        @Override
        public String toString() { return sb.toString(); }
    }
}
