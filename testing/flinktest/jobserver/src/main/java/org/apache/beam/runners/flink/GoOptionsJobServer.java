package org.apache.beam.runners.flink;

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
import org.apache.beam.runners.jobsubmission.JobInvocation;
import org.apache.beam.runners.jobsubmission.JobServerDriver;
import org.apache.beam.sdk.fn.server.GrpcContextHeaderAccessorProvider;
import org.apache.beam.sdk.fn.server.ServerFactory;
import org.apache.beam.sdk.options.PipelineOptions;
import org.apache.beam.sdk.options.PipelineOptionsFactory;
import org.apache.beam.sdk.options.StreamingOptions;
import org.apache.beam.sdk.util.construction.PipelineOptionsTranslation;
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
 * Beam's Flink job server (FlinkJobServerDriver, same arguments) with three changes.
 *
 * <p>The Go SDK's portable runner sends only parallelism, experiments and the application name
 * as pipeline options a Java runner reads; every other flag of the Go program travels inside
 * {@code beam:option:go_options:v1}, which Java ignores. This driver lifts each Go flag named
 * after a Flink runner option ({@code --checkpointing_interval}, {@code --savepoint_path}, ...:
 * the properties of FlinkPipelineOptions and {@code --streaming}) into the options the runner
 * reads, unless the job set that option itself; an empty value counts as unset.
 *
 * <p>With {@code -Dbeamdedup.stage=none} it stages no jar with a job: for a cluster whose
 * processes have the runner on their classpath (testing/flinktest's cluster), instead of
 * uploading the job server's whole classpath with every job (Beam's default, kept otherwise).
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
      FlinkPipelineOptions flinkOptions =
          PipelineOptionsTranslation.fromProto(withGo).as(FlinkPipelineOptions.class);
      LOG.info("Flink options from the job's Go flags: {}", lifted);
      if (stage) {
        return super.invokeWithExecutor(pipeline, withGo, retrievalToken, executorService);
      }
      String invocationId =
          String.format("%s_%s", flinkOptions.getJobName(), UUID.randomUUID().toString());
      if (FlinkPipelineOptions.AUTO.equals(flinkOptions.getFlinkMaster())) {
        flinkOptions.setFlinkMaster(config.getFlinkMaster());
      }
      FlinkPipelineRunner runner =
          new FlinkPipelineRunner(flinkOptions, config.getFlinkConfDir(), new ArrayList<>());
      flinkOptions.setRunner(null);
      return createJobInvocation(
          invocationId, retrievalToken, executorService, pipeline, flinkOptions, runner);
    }
  }
}
