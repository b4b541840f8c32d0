package beamdedup.peers;

import java.io.File;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.table.api.EnvironmentSettings;
import org.apache.flink.table.api.TableEnvironment;

/**
 * Flink SQL's keep-first and keep-last on the orders file, submitted to a Flink session cluster.
 *
 * <pre>
 * FlinkSqlClusterPeer REST_HOST:PORT PARALLELISM SHIP_JARS FILE QUERY...
 *     QUERY is keep_first or keep_last (by order_id, on processing time, every column of the
 *     kept rows into a blackhole sink, as FlinkSqlPeer's orders mode); SHIP_JARS are the jars
 *     (separated by the path separator) the cluster's classpath lacks, sent with each job.
 * </pre>
 *
 * Every result is a line "name key=value ...": the job's time from its submission to its end.
 */
public final class FlinkSqlClusterPeer {
  private FlinkSqlClusterPeer() {}

  public static void main(String[] args) throws Exception {
    if (args.length < 5) {
      throw new IllegalArgumentException(
          "usage: FlinkSqlClusterPeer REST_HOST:PORT PARALLELISM SHIP_JARS FILE keep_first|keep_last...");
    }
    String[] rest = args[0].split(":");
    Configuration conf = new Configuration();
    conf.setString("execution.target", "remote");
    conf.setString("rest.address", rest[0]);
    conf.setString("rest.port", rest[1]);
    conf.setString("parallelism.default", args[1]);
    StringBuilder jars = new StringBuilder();
    for (String jar : args[2].split(File.pathSeparator)) {
      if (!jar.isEmpty()) {
        jars.append(jars.length() == 0 ? "" : ";").append(new File(jar).toURI().toURL());
      }
    }
    conf.setString("pipeline.jars", jars.toString());
    // Each row through the operators as it comes (no mini-batch), as the
    // embedded peer and our stateful steps.
    conf.setString("table.exec.mini-batch.enabled", "false");
    TableEnvironment env =
        TableEnvironment.create(
            EnvironmentSettings.newInstance().inStreamingMode().withConfiguration(conf).build());
    String path = new File(args[3]).getAbsolutePath();
    env.executeSql(
        "CREATE TABLE orders (order_id STRING, quantity BIGINT, price DOUBLE, created_at STRING,"
            + " pt AS PROCTIME()) WITH ('connector' = 'filesystem', 'path' = '" + path + "',"
            + " 'format' = 'json')");
    env.executeSql(
        "CREATE TABLE orders_sink (order_id STRING, quantity BIGINT, price DOUBLE,"
            + " created_at STRING) WITH ('connector' = 'blackhole')");
    for (int i = 4; i < args.length; i++) {
      String order = args[i].equals("keep_last") ? "DESC" : "ASC";
      String sql =
          "INSERT INTO orders_sink SELECT order_id, quantity, price, created_at FROM (SELECT *,"
              + " ROW_NUMBER() OVER (PARTITION BY order_id ORDER BY pt " + order + ") AS rn"
              + " FROM orders) WHERE rn = 1";
      long start = System.nanoTime();
      env.executeSql(sql).await();
      double secs = (System.nanoTime() - start) / 1e9;
      System.out.printf("cluster_%s seconds=%.3f%n", args[i], secs);
    }
  }
}
