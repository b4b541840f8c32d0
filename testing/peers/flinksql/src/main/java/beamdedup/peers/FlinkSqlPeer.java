package beamdedup.peers;

import java.io.File;
import java.lang.management.ManagementFactory;
import java.util.EnumMap;
import java.util.Map;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.table.api.EnvironmentSettings;
import org.apache.flink.table.api.TableEnvironment;
import org.apache.flink.table.api.TableResult;
import org.apache.flink.types.Row;
import org.apache.flink.types.RowKind;
import org.apache.flink.util.CloseableIterator;

/**
 * Flink SQL's deduplication on our generated data, in a local MiniCluster
 * (streaming mode, parallelism 1, so that rows arrive in file order).
 *
 * <pre>
 * FlinkSqlPeer changelog FILE...  keep-first and keep-last by order_id on ts (event time),
 *                               the changelog's rows by kind (order-status events); for
 *                               the second and later files the names end in _2, _3, ...
 * FlinkSqlPeer orders FILE      keep-first and keep-last by order_id on processing time, rows/s
 * FlinkSqlPeer nexmark FILE     Nexmark q0 and q18 on the bids, rows/s and q18/q0
 * FlinkSqlPeer kafka BROKERS IN OUT GROUP [PARALLELISM]
 *                               seed 001: keep-first by order_id on processing time from
 *                               topic IN (read from the earliest offsets to the end offsets
 *                               at the start) into topic OUT, keyed by order_id
 * </pre>
 *
 * Every result is a line "name key=value ...", for the Go side to read.
 */
public final class FlinkSqlPeer {
  private FlinkSqlPeer() {}

  public static void main(String[] args) throws Exception {
    if (args.length < 2) {
      throw new IllegalArgumentException("usage: FlinkSqlPeer changelog|orders|nexmark FILE... | kafka BROKERS IN OUT GROUP [PARALLELISM]");
    }
    Configuration conf = new Configuration();
    conf.setString("parallelism.default", "1");
    if (args[0].equals("kafka")) {
      if (args.length < 5) {
        throw new IllegalArgumentException("usage: FlinkSqlPeer kafka BROKERS IN OUT GROUP [PARALLELISM]");
      }
      if (args.length > 5) {
        conf.setString("parallelism.default", args[5]);
      }
      conf.setString("table.exec.mini-batch.enabled", "false");
      kafka(
          TableEnvironment.create(
              EnvironmentSettings.newInstance().inStreamingMode().withConfiguration(conf).build()),
          args[1], args[2], args[3], args[4]);
      return;
    }
    // Each row through the operators as it comes (no mini-batch), as our
    // stateful steps; Flink's default too.
    conf.setString("table.exec.mini-batch.enabled", "false");
    TableEnvironment env =
        TableEnvironment.create(
            EnvironmentSettings.newInstance().inStreamingMode().withConfiguration(conf).build());
    env.executeSql("CREATE TABLE blackhole_sink (n BIGINT) WITH ('connector' = 'blackhole')");
    for (int i = 1; i < args.length; i++) {
      String path = new File(args[i]).getAbsolutePath();
      String suffix = i == 1 ? "" : "_" + i;
      switch (args[0]) {
        case "changelog" -> changelog(env, path, suffix);
        case "orders" -> orders(env, path);
        case "nexmark" -> nexmark(env, path);
        default -> throw new IllegalArgumentException("unknown mode " + args[0]);
      }
    }
  }

  /** The keep-first and keep-last queries' changelogs on order-status events. */
  static void changelog(TableEnvironment env, String path, String suffix) throws Exception {
    env.executeSql("DROP TABLE IF EXISTS events");
    env.executeSql(
        "CREATE TABLE events (order_id STRING, status STRING, ts TIMESTAMP_LTZ(3),"
            + " WATERMARK FOR ts AS ts - INTERVAL '5' MINUTE) WITH ('connector' = 'filesystem',"
            + " 'path' = '" + path + "', 'format' = 'json', 'json.ignore-parse-errors' = 'true',"
            + " 'json.timestamp-format.standard' = 'ISO-8601')");
    for (String order : new String[] {"ASC", "DESC"}) {
      String name = (order.equals("ASC") ? "keep_first" : "keep_last") + suffix;
      String sql =
          "SELECT order_id, status, ts FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY order_id"
              + " ORDER BY ts " + order + ") AS rn FROM events WHERE order_id IS NOT NULL"
              + " AND status IS NOT NULL AND ts IS NOT NULL) WHERE rn = 1";
      Map<RowKind, Long> kinds = new EnumMap<>(RowKind.class);
      long start = System.nanoTime();
      TableResult r = env.executeSql(sql);
      try (CloseableIterator<Row> it = r.collect()) {
        while (it.hasNext()) {
          kinds.merge(it.next().getKind(), 1L, Long::sum);
        }
      }
      double secs = (System.nanoTime() - start) / 1e9;
      System.out.printf(
          "%s +I=%d -U=%d +U=%d -D=%d seconds=%.3f plan=%s%n",
          name,
          kinds.getOrDefault(RowKind.INSERT, 0L),
          kinds.getOrDefault(RowKind.UPDATE_BEFORE, 0L),
          kinds.getOrDefault(RowKind.UPDATE_AFTER, 0L),
          kinds.getOrDefault(RowKind.DELETE, 0L),
          secs,
          dedupNode(env.explainSql(sql)));
    }
  }

  /** The Deduplicate node of a plan, for the record of what Flink ran. */
  static String dedupNode(String plan) {
    for (String line : plan.split("\n")) {
      // At the top of a query's plan, under a sink's ("+- ") in an INSERT's.
      int at = line.indexOf("Deduplicate(");
      if (at >= 0) {
        return line.substring(at).trim().replace(' ', '_');
      }
    }
    return "none";
  }

  /**
   * Keep-first and keep-last by order_id on processing time (the article's query), every column
   * of the kept rows into a blackhole sink (ours writes them to a file), and a plain scan of the
   * file into the same sink.
   */
  static void orders(TableEnvironment env, String path) throws Exception {
    env.executeSql(
        "CREATE TABLE orders (order_id STRING, quantity BIGINT, price DOUBLE, created_at STRING,"
            + " pt AS PROCTIME()) WITH ('connector' = 'filesystem', 'path' = '" + path + "',"
            + " 'format' = 'json')");
    env.executeSql(
        "CREATE TABLE orders_sink (order_id STRING, quantity BIGINT, price DOUBLE,"
            + " created_at STRING) WITH ('connector' = 'blackhole')");
    String columns = "order_id, quantity, price, created_at";
    long rows = count(env, "SELECT COUNT(*) FROM orders");
    double scan = run(env, "INSERT INTO orders_sink SELECT " + columns + " FROM orders");
    for (String order : new String[] {"ASC", "DESC"}) {
      String dedup =
          "SELECT " + columns + " FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY order_id"
              + " ORDER BY pt " + order + ") AS rn FROM orders) WHERE rn = 1";
      long out = count(env, "SELECT COUNT(*) FROM (" + dedup + ")");
      double cpu0 = processCpuSeconds();
      double secs = run(env, "INSERT INTO orders_sink " + dedup);
      double cpu = processCpuSeconds() - cpu0;
      System.out.printf(
          "orders_%s rows=%d emitted=%d seconds=%.3f rows_per_s=%.0f cpu_seconds=%.3f"
              + " scan_seconds=%.3f%n",
          order.equals("ASC") ? "keep_first" : "keep_last", rows, out, secs, rows / secs, cpu, scan);
    }
  }

  /**
   * Seed 001's query on Kafka: the orders topic (JSON values) from the earliest offsets to the end
   * offsets at the start (a bounded read, so the job ends by itself), keep-first by order_id on
   * processing time, into the output topic (JSON values keyed by order_id, at least once).
   * start_ms is the wall clock just before the job is submitted, for the caller to time the job
   * to the last record written.
   */
  static void kafka(TableEnvironment env, String brokers, String in, String out, String group)
      throws Exception {
    env.executeSql(
        "CREATE TABLE orders_in (order_id STRING, quantity BIGINT, price DOUBLE, created_at STRING,"
            + " pt AS PROCTIME()) WITH ('connector' = 'kafka', 'topic' = '" + in + "',"
            + " 'properties.bootstrap.servers' = '" + brokers + "', 'properties.group.id' = '"
            + group + "', 'scan.startup.mode' = 'earliest-offset',"
            + " 'scan.bounded.mode' = 'latest-offset', 'format' = 'json',"
            + " 'json.ignore-parse-errors' = 'true')");
    env.executeSql(
        "CREATE TABLE orders_out (order_id STRING, quantity BIGINT, price DOUBLE, created_at STRING)"
            + " WITH ('connector' = 'kafka', 'topic' = '" + out + "',"
            + " 'properties.bootstrap.servers' = '" + brokers + "', 'key.format' = 'raw',"
            + " 'key.fields' = 'order_id', 'value.format' = 'json',"
            + " 'value.fields-include' = 'ALL', 'sink.delivery-guarantee' = 'at-least-once')");
    String sql =
        "INSERT INTO orders_out SELECT order_id, quantity, price, created_at FROM (SELECT *,"
            + " ROW_NUMBER() OVER (PARTITION BY order_id ORDER BY pt ASC) AS rn FROM orders_in)"
            + " WHERE rn = 1";
    String plan = dedupNode(env.explainSql(sql));
    long startMs = System.currentTimeMillis();
    double secs = run(env, sql);
    System.out.printf(
        "kafka_keep_first start_ms=%d seconds=%.3f plan=%s%n", startMs, secs, plan);
  }

  /** Nexmark q0 (pass-through) and q18 (the last bid per bidder and auction). */
  static void nexmark(TableEnvironment env, String path) throws Exception {
    env.executeSql(
        "CREATE TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING,"
            + " date_time BIGINT, extra STRING, dt AS TO_TIMESTAMP_LTZ(date_time, 3),"
            + " WATERMARK FOR dt AS dt - INTERVAL '4' SECOND) WITH ('connector' = 'filesystem',"
            + " 'path' = '" + path + "', 'format' = 'json')");
    long rows = count(env, "SELECT COUNT(*) FROM bid");
    env.executeSql(
        "CREATE TABLE nexmark_sink (auction BIGINT, bidder BIGINT, price BIGINT, dt TIMESTAMP_LTZ(3),"
            + " extra STRING) WITH ('connector' = 'blackhole')");
    double q0 = run(env, "INSERT INTO nexmark_sink SELECT auction, bidder, price, dt, extra FROM bid");
    double q18 =
        run(
            env,
            "INSERT INTO nexmark_sink SELECT auction, bidder, price, dt, extra FROM (SELECT *,"
                + " ROW_NUMBER() OVER (PARTITION BY bidder, auction ORDER BY dt DESC) AS rn FROM bid)"
                + " WHERE rn <= 1");
    System.out.printf(
        "nexmark bids=%d q0_seconds=%.3f q0_rows_per_s=%.0f q18_seconds=%.3f q18_rows_per_s=%.0f"
            + " q18_over_q0=%.3f%n",
        rows, q0, rows / q0, q18, rows / q18, q0 / q18);
  }

  /** The CPU time this JVM has used, every thread's. */
  static double processCpuSeconds() {
    return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
            .getProcessCpuTime()
        / 1e9;
  }

  static long count(TableEnvironment env, String sql) throws Exception {
    long last = 0;
    try (CloseableIterator<Row> it = env.executeSql(sql).collect()) {
      while (it.hasNext()) {
        Row row = it.next();
        if (row.getKind() == RowKind.INSERT || row.getKind() == RowKind.UPDATE_AFTER) {
          last = (Long) row.getField(0);
        }
      }
    }
    return last;
  }

  /** Runs an INSERT to its end and returns its wall time in seconds. */
  static double run(TableEnvironment env, String sql) throws Exception {
    long start = System.nanoTime();
    env.executeSql(sql).await();
    return (System.nanoTime() - start) / 1e9;
  }
}
