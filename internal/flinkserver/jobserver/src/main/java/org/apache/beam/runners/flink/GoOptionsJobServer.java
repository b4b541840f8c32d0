package org.apache.beam.runners.flink;

import static org.apache.beam.sdk.util.construction.resources.PipelineResources.detectClassPathResourcesToStage;

import java.io.IOException;
import java.lang.reflect.Method;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.apache.beam.model.pipeline.v1.Endpoints;
import org.apache.beam.model.pipeline.v1.RunnerApi;
import org.apache.beam.model.pipeline.v1.SchemaApi;
import org.apache.beam.runners.jobsubmission.JobInvocation;
import org.apache.beam.runners.jobsubmission.JobServerDriver;
import org.apache.beam.runners.jobsubmission.PortablePipelineRunner;
import org.apache.beam.sdk.fn.server.GrpcContextHeaderAccessorProvider;
import org.apache.beam.sdk.fn.server.ServerFactory;
import org.apache.beam.sdk.options.PipelineOptions;
import org.apache.beam.sdk.options.PipelineOptionsFactory;
import org.apache.beam.sdk.options.StreamingOptions;
import org.apache.beam.sdk.util.construction.PipelineOptionsTranslation;
import org.apache.beam.vendor.grpc.v1p60p1.com.google.protobuf.InvalidProtocolBufferException;
import org.apache.beam.vendor.grpc.v1p60p1.com.google.protobuf.Struct;
import org.apache.beam.vendor.grpc.v1p60p1.com.google.protobuf.Value;
import org.apache.beam.vendor.grpc.v1p60p1.io.grpc.BindableService;
import org.apache.beam.vendor.grpc.v1p60p1.io.grpc.Server;
import org.apache.beam.vendor.grpc.v1p60p1.io.grpc.ServerInterceptors;
import org.apache.beam.vendor.grpc.v1p60p1.io.grpc.netty.NettyServerBuilder;
import org.apache.beam.vendor.guava.v32_1_2_jre.com.google.common.base.CaseFormat;
import org.apache.beam.vendor.guava.v32_1_2_jre.com.google.common.util.concurrent.ListeningExecutorService;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Beam's Flink job server (FlinkJobServerDriver, same arguments) with these changes.
 *
 * <p>The Go SDK's portable runner sends only parallelism, experiments and the application name
 * as pipeline options a Java runner reads; every other flag of the Go program travels inside
 * {@code beam:option:go_options:v1}, which Java ignores. This driver lifts each Go flag named
 * after a Flink runner option ({@code --checkpointing_interval}, {@code --savepoint_path}, ...:
 * the properties of FlinkPipelineOptions and {@code --streaming}) into the options the runner
 * reads, unless the job set that option itself; an empty value counts as unset.
 *
 * <p>A Go job gets {@code --finish_bundle_before_checkpointing=true}, its latest checkpoint retained
 * when it is cancelled or fails ({@code --externalized_checkpoints_enabled=true
 * --retain_externalized_checkpoints_on_cancellation=true}) and, when the JVM's system
 * property {@value #CHECKPOINTING_INTERVAL} gives one (milliseconds), that checkpoint interval,
 * unless it sets them itself (goDefaults): without the first a splittable source may never start
 * once checkpoints are on.
 *
 * <p>A job in streaming mode runs on GoPipelineRunner: its splittable sources on the job server's
 * own operator (io.github.beamdedup.flink), which keeps their resumptions in one state, and its
 * impulses end once those sources have, so that a job whose sources end ends, checkpoints on or
 * off. The Go option {@code stock_flink_runner=true} runs a job on Beam's runner as released.
 *
 * <p>This project's classes come first on the job server's (and the session cluster's) classpath,
 * and three replace Beam's of the same name: BundleCheckpointHandlers (a resumption's delay kept
 * to the millisecond), ImpulseSourceFunction (an impulse that ends with the job's splittable
 * sources) and ProcessManager (a PROCESS worker stopped with its boot loader, and when its
 * TaskManager dies).
 *
 * <p>With {@code -Dbeamdedup.stage=none} it stages no jar with a job: for a cluster whose
 * processes have the runner on their classpath (testing/flinktest's cluster), instead of
 * uploading the job server's whole classpath with every job (Beam's default, kept otherwise).
 *
 * <p>A Go job's schema rows keep their nil slices, maps and byte slices. Beam Go writes a nil
 * one as a null field, of a field its schema declares non-nullable; Beam Java's RowCoder decodes
 * the null, and re-encodes a row of a schema without nullable fields with no null bits and the
 * null field left out, so the Go worker that reads it runs into the next field and the next
 * elements: rows are lost or garbled silently, or the job fails (notes/beam-defects.md, 15). This
 * driver declares those fields of a Go job's row schemas nullable, which changes no Go type (Beam
 * Go finds a row's type by its schema's id) and makes Java write their null bits. The Go option
 * {@code keep_go_schemas=true} leaves a job's schemas as sent (the defect's reproduction).
 *
 * <p>Its Job API and artifact service listen on the loopback interface only: Beam's listen on
 * every interface, whatever {@code --job-host} says (ServerFactory builds its servers with
 * NettyServerBuilder.forPort).
 *
 * <p>It lives in Beam's package only to read the server configuration's package-private master
 * and configuration directory.
 */
public class GoOptionsJobServer extends JobServerDriver {
  private static final Logger LOG = LoggerFactory.getLogger(GoOptionsJobServer.class);

  private static final String PREFIX = "beam:option:";
  private static final String SUFFIX = ":v1";
  private static final String GO_OPTIONS = PREFIX + "go_options" + SUFFIX;

  /** Options a job may not choose for the server: where and with which files it submits. */
  private static final List<String> SERVER_SIDE =
      List.of("flinkMaster", "flinkConfDir", "filesToStage");

  /** The system property of the default checkpoint interval of a Go job, in milliseconds. */
  static final String CHECKPOINTING_INTERVAL = "beamdedup.checkpointing_interval";

  public static void main(String[] args) throws Exception {
    PipelineOptions options = PipelineOptionsFactory.create();
    org.apache.beam.sdk.io.FileSystems.setDefaultPipelineOptions(options);
    FlinkJobServerDriver.FlinkServerConfiguration config = FlinkJobServerDriver.parseArgs(args);
    boolean stage = !"none".equals(System.getProperty("beamdedup.stage", "classpath"));
    new GoOptionsJobServer(config, stage).run();
  }

  private GoOptionsJobServer(FlinkJobServerDriver.FlinkServerConfiguration config, boolean stage) {
    super(
        config,
        new Loopback(config.getPort()),
        new Loopback(config.getArtifactPort()),
        () -> new Invoker(config, stage));
  }

  /** Builds gRPC servers on the loopback address, as Beam's ServerFactory does on every one. */
  static class Loopback extends ServerFactory {
    private final int port;

    Loopback(int port) {
      this.port = port;
    }

    @Override
    public Server allocateAddressAndCreate(
        List<BindableService> services, Endpoints.ApiServiceDescriptor.Builder descriptor)
        throws IOException {
      Server server = build(services, port);
      descriptor.setUrl("localhost:" + server.getPort());
      return server;
    }

    @Override
    public Server create(List<BindableService> services, Endpoints.ApiServiceDescriptor descriptor)
        throws IOException {
      String url = descriptor.getUrl();
      return build(services, Integer.parseInt(url.substring(url.lastIndexOf(':') + 1)));
    }

    private static Server build(List<BindableService> services, int port) throws IOException {
      NettyServerBuilder builder =
          NettyServerBuilder.forAddress(new InetSocketAddress(InetAddress.getLoopbackAddress(), port))
              .maxInboundMessageSize(Integer.MAX_VALUE)
              .permitKeepAliveTime(20, TimeUnit.SECONDS);
      for (BindableService service : services) {
        builder.addService(
            ServerInterceptors.intercept(service, GrpcContextHeaderAccessorProvider.interceptor()));
      }
      return builder.build().start();
    }
  }

  /** The Flink runner options a Go flag may set, by their Java property names. */
  static TreeSet<String> liftable() {
    TreeSet<String> names = new TreeSet<>();
    for (Class<?> c :
        List.of(
            FlinkPipelineOptions.class,
            VersionDependentFlinkPipelineOptions.class,
            StreamingOptions.class)) {
      for (Method m : c.getDeclaredMethods()) {
        String n = m.getName();
        String prop =
            n.startsWith("get") ? n.substring(3) : n.startsWith("is") ? n.substring(2) : null;
        if (prop == null || prop.isEmpty() || m.getParameterCount() != 0) {
          continue;
        }
        names.add(Character.toLowerCase(prop.charAt(0)) + prop.substring(1));
      }
    }
    names.removeAll(SERVER_SIDE);
    return names;
  }

  /**
   * The options with each liftable Go flag added as the runner option of its name, and the names
   * lifted.
   */
  static Struct lift(Struct options, Map<String, String> lifted) {
    Value go = options.getFieldsMap().get(GO_OPTIONS);
    if (go == null || !go.hasStructValue()) {
      return options;
    }
    Value inner = go.getStructValue().getFieldsMap().get("options");
    if (inner == null || !inner.hasStructValue()) {
      return options;
    }
    TreeSet<String> liftable = liftable();
    Struct.Builder out = options.toBuilder();
    for (Map.Entry<String, Value> e : inner.getStructValue().getFieldsMap().entrySet()) {
      String camel = CaseFormat.LOWER_UNDERSCORE.to(CaseFormat.LOWER_CAMEL, e.getKey());
      String key = PREFIX + e.getKey() + SUFFIX;
      // An empty value is an option left unset (a Go program cannot delete one).
      boolean empty = e.getValue().hasStringValue() && e.getValue().getStringValue().isEmpty();
      if (empty || !liftable.contains(camel) || options.getFieldsMap().containsKey(key)) {
        continue;
      }
      out.putFields(key, e.getValue());
      lifted.put(camel, e.getValue().getStringValue());
    }
    return out.build();
  }

  /**
   * The options with the defaults a Go job needs for its state to survive a stop or a crash, each
   * where the job did not set the option itself, and the names and values given.
   *
   * <p>{@code checkpointingInterval}: the job server's default (its system property {@value
   * #CHECKPOINTING_INTERVAL}, in milliseconds; unset or 0: none), for a job in streaming mode
   * (Flink ignores it in batch mode). A job that sets its own, -1 for none, keeps it.
   *
   * <p>{@code finishBundleBeforeCheckpointing}: without it a snapshot that comes before the
   * impulse stage's first bundle ends buffers that bundle's one output (a splittable source's
   * restriction) while the stage's final watermark goes out directly, and the source never
   * starts (notes/beam-defects.md). It changes nothing for a job without checkpoints.
   *
   * <p>{@code externalizedCheckpointsEnabled} and {@code retainExternalizedCheckpointsOnCancellation}:
   * the job's latest completed checkpoint is kept when the job is cancelled or fails for good
   * (Flink's default, and Beam's, delete it then), so that a job's state outlives the job even
   * without a savepoint: it restores with {@code --savepoint_path} set to that checkpoint.
   */
  static Struct goDefaults(Struct options, long checkpointingInterval, Map<String, String> defaulted) {
    Struct.Builder out = options.toBuilder();
    for (String[] d :
        new String[][] {
          {"finish_bundle_before_checkpointing", "finishBundleBeforeCheckpointing"},
          {"externalized_checkpoints_enabled", "externalizedCheckpointsEnabled"},
          {"retain_externalized_checkpoints_on_cancellation", "retainExternalizedCheckpointsOnCancellation"},
        }) {
      String key = PREFIX + d[0] + SUFFIX;
      if (!options.getFieldsMap().containsKey(key)) {
        out.putFields(key, Value.newBuilder().setStringValue("true").build());
        defaulted.put(d[1], "true");
      }
    }
    String interval = PREFIX + "checkpointing_interval" + SUFFIX;
    if (checkpointingInterval > 0 && !options.getFieldsMap().containsKey(interval)) {
      String v = Long.toString(checkpointingInterval);
      out.putFields(interval, Value.newBuilder().setStringValue(v).build());
      defaulted.put("checkpointingInterval", v);
    }
    return out.build();
  }

  /**
   * The options with the Flink job's name fixed and, as Go options its workers read
   * ({@code flink_job_name}, {@code flink_rest}), that name and the REST address of the cluster
   * it runs on (a master given as host:port; none for an embedded cluster): kafkaio's
   * transactional write commits a transaction once a checkpoint after it completed, which it
   * learns from Flink's REST API.
   */
  static Struct withJobIdentity(Struct options, String jobName, String master) {
    Struct.Builder out = options.toBuilder();
    out.putFields(PREFIX + "job_name" + SUFFIX, Value.newBuilder().setStringValue(jobName).build());
    Value go = options.getFieldsMap().get(GO_OPTIONS);
    if (go == null || !go.hasStructValue()) {
      return out.build();
    }
    Value inner = go.getStructValue().getFieldsMap().get("options");
    Struct.Builder in =
        inner != null && inner.hasStructValue() ? inner.getStructValue().toBuilder() : Struct.newBuilder();
    in.putFields("flink_job_name", Value.newBuilder().setStringValue(jobName).build());
    boolean rest = master != null && master.matches("[^\\[\\]/]+:[0-9]+");
    if (rest && !in.getFieldsMap().containsKey("flink_rest")) {
      in.putFields("flink_rest", Value.newBuilder().setStringValue(master).build());
    }
    Struct.Builder goOut = go.getStructValue().toBuilder();
    goOut.putFields("options", Value.newBuilder().setStructValue(in).build());
    out.putFields(GO_OPTIONS, Value.newBuilder().setStructValue(goOut).build());
    return out.build();
  }

  static boolean isGo(Struct options) {
    return options.getFieldsMap().containsKey(GO_OPTIONS);
  }

  static String goOption(Struct options, String name) {
    Value go = options.getFieldsMap().get(GO_OPTIONS);
    if (go == null || !go.hasStructValue()) {
      return null;
    }
    Value inner = go.getStructValue().getFieldsMap().get("options");
    if (inner == null || !inner.hasStructValue()) {
      return null;
    }
    Value v = inner.getStructValue().getFieldsMap().get(name);
    return v == null ? null : v.getStringValue();
  }

  /** The pipeline with every slice, map and bytes field of its row coders' schemas nullable. */
  static RunnerApi.Pipeline nullableGoFields(RunnerApi.Pipeline pipeline, List<String> made) {
    RunnerApi.Pipeline.Builder out = pipeline.toBuilder();
    for (Map.Entry<String, RunnerApi.Coder> e : pipeline.getComponents().getCodersMap().entrySet()) {
      RunnerApi.Coder coder = e.getValue();
      if (!"beam:coder:row:v1".equals(coder.getSpec().getUrn())) {
        continue;
      }
      SchemaApi.Schema schema;
      try {
        schema = SchemaApi.Schema.parseFrom(coder.getSpec().getPayload());
      } catch (InvalidProtocolBufferException ex) {
        throw new IllegalArgumentException("coder " + e.getKey() + ": not a row schema", ex);
      }
      SchemaApi.Schema fixed = nullable(schema, e.getKey(), made);
      if (!fixed.equals(schema)) {
        out.getComponentsBuilder()
            .putCoders(
                e.getKey(),
                coder.toBuilder()
                    .setSpec(coder.getSpec().toBuilder().setPayload(fixed.toByteString()))
                    .build());
      }
    }
    return out.build();
  }

  private static SchemaApi.Schema nullable(SchemaApi.Schema schema, String where, List<String> made) {
    SchemaApi.Schema.Builder b = schema.toBuilder();
    for (int i = 0; i < b.getFieldsCount(); i++) {
      SchemaApi.Field f = b.getFields(i);
      SchemaApi.FieldType t = nullable(f.getType(), where + "." + f.getName(), made);
      boolean nilable =
          t.hasArrayType()
              || t.hasIterableType()
              || t.hasMapType()
              || (t.hasAtomicType() && t.getAtomicType() == SchemaApi.AtomicType.BYTES);
      if (nilable && !t.getNullable()) {
        t = t.toBuilder().setNullable(true).build();
        made.add(where + "." + f.getName());
      }
      b.setFields(i, f.toBuilder().setType(t));
    }
    return b.build();
  }

  /** The field type with the fields of the rows it holds made nullable likewise. */
  private static SchemaApi.FieldType nullable(
      SchemaApi.FieldType t, String where, List<String> made) {
    if (t.hasRowType()) {
      return t.toBuilder()
          .setRowType(
              t.getRowType().toBuilder().setSchema(nullable(t.getRowType().getSchema(), where, made)))
          .build();
    }
    if (t.hasArrayType()) {
      return t.toBuilder()
          .setArrayType(
              t.getArrayType().toBuilder()
                  .setElementType(nullable(t.getArrayType().getElementType(), where, made)))
          .build();
    }
    if (t.hasIterableType()) {
      return t.toBuilder()
          .setIterableType(
              t.getIterableType().toBuilder()
                  .setElementType(nullable(t.getIterableType().getElementType(), where, made)))
          .build();
    }
    if (t.hasMapType()) {
      return t.toBuilder()
          .setMapType(
              t.getMapType().toBuilder()
                  .setKeyType(nullable(t.getMapType().getKeyType(), where, made))
                  .setValueType(nullable(t.getMapType().getValueType(), where, made)))
          .build();
    }
    return t;
  }

  static class Invoker extends FlinkJobInvoker {
    private final FlinkJobServerDriver.FlinkServerConfiguration config;
    private final boolean stage;

    Invoker(FlinkJobServerDriver.FlinkServerConfiguration config, boolean stage) {
      super(config);
      this.config = config;
      this.stage = stage;
    }

    @Override
    protected JobInvocation invokeWithExecutor(
        RunnerApi.Pipeline pipeline,
        Struct options,
        String retrievalToken,
        ListeningExecutorService executorService) {
      Map<String, String> lifted = new TreeMap<>();
      Struct withGo = lift(options, lifted);
      Map<String, String> defaulted = new TreeMap<>();
      if (isGo(options)) {
        withGo =
            goDefaults(withGo, Long.getLong(CHECKPOINTING_INTERVAL, 0L), defaulted);
      }
      if (isGo(options) && !"true".equals(goOption(options, "keep_go_schemas"))) {
        List<String> made = new ArrayList<>();
        pipeline = nullableGoFields(pipeline, made);
        if (!made.isEmpty()) {
          LOG.info("Go row fields declared nullable (a nil one is written as null): {}", made);
        }
      }
      FlinkPipelineOptions flinkOptions =
          PipelineOptionsTranslation.fromProto(withGo).as(FlinkPipelineOptions.class);
      if (isGo(options)) {
        String master = flinkOptions.getFlinkMaster();
        if (FlinkPipelineOptions.AUTO.equals(master)) {
          master = config.getFlinkMaster();
        }
        withGo = withJobIdentity(withGo, flinkOptions.getJobName(), master);
        flinkOptions = PipelineOptionsTranslation.fromProto(withGo).as(FlinkPipelineOptions.class);
      }
      LOG.info("Flink options from the job's Go flags: {}", lifted);
      if (!defaulted.isEmpty()) {
        LOG.info("Flink options a Go job gets by default (set them to override): {}", defaulted);
      }
      String invocationId =
          String.format("%s_%s", flinkOptions.getJobName(), UUID.randomUUID().toString());
      if (FlinkPipelineOptions.AUTO.equals(flinkOptions.getFlinkMaster())) {
        flinkOptions.setFlinkMaster(config.getFlinkMaster());
      }
      List<String> files =
          stage
              ? detectClassPathResourcesToStage(
                  GoOptionsJobServer.class.getClassLoader(), flinkOptions)
              : new ArrayList<>();
      boolean stock = "true".equals(goOption(options, "stock_flink_runner"));
      if (stock) {
        LOG.info("Beam's Flink runner as released (stock_flink_runner=true)");
      }
      PortablePipelineRunner runner =
          new GoPipelineRunner(flinkOptions, config.getFlinkConfDir(), files, stock);
      flinkOptions.setRunner(null);
      return createJobInvocation(
          invocationId, retrievalToken, executorService, pipeline, flinkOptions, runner);
    }
  }
}
