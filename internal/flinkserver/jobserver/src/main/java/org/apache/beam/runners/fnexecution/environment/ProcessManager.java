package org.apache.beam.runners.fnexecution.environment;

import java.io.File;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * beamdedup's version of Beam 2.62.0's class of this name (it replaces Beam's on the job server's
 * and the session cluster's classpath): it starts and stops the processes of a PROCESS
 * environment (an SDK's boot loader, which runs the SDK worker as its child), with the same API.
 *
 * <p>Beam's stops a worker by killing the boot loader alone: Beam Go's boot loader neither
 * forwards the signal nor takes its child along, so the worker runs on with no parent, holding its
 * connections; and when the TaskManager dies (kill -9), nothing stops either. Here each command
 * runs under a small shell, in a session of its own (setsid, so that a signal to the
 * TaskManager's process group does not reach it), that runs the command in a process group of
 * its own and kills that group when it is told to stop (SIGTERM, as Beam sends) or when the
 * TaskManager that started it is gone (it checks every second). Stopping also kills what is left
 * of the process's descendants. Where setsid is missing (not Linux), the command runs under the
 * shell without a session or group of its own, and only the descendants the JVM can see are
 * stopped.
 */
public class ProcessManager {
  private static final Logger LOG = LoggerFactory.getLogger(ProcessManager.class);

  /** A symbolic file to indicate that we want to inherit I/O of parent process. */
  public static final File INHERIT_IO_FILE = new File("_inherit_io_unused_filename_");

  /**
   * The shell that runs "$@" in a process group of its own and kills the group when told to stop
   * or when its parent (the JVM) is gone. Its own exit status is the command's.
   */
  static final String WATCH =
      "parent=$PPID\n"
          + "if command -v setsid >/dev/null 2>&1; then setsid \"$@\" & else \"$@\" & fi\n"
          + "child=$!\n"
          + "stop() { kill -KILL -\"$child\" 2>/dev/null || kill -KILL \"$child\" 2>/dev/null; }\n"
          + "trap 'stop; exit 143' TERM INT HUP\n"
          + "while kill -0 \"$child\" 2>/dev/null; do\n"
          + "  if ! kill -0 \"$parent\" 2>/dev/null; then stop; exit 137; fi\n"
          + "  sleep 1 & wait $!\n"
          + "done\n"
          + "wait \"$child\"; status=$?\n"
          + "stop\n"
          + "exit $status\n";

  private static final boolean WINDOWS = System.getProperty("os.name", "").startsWith("Windows");

  /** The setsid command, or null. */
  private static final String SETSID = onPath("setsid");

  private static String onPath(String name) {
    for (String dir : System.getenv().getOrDefault("PATH", "/usr/bin:/bin").split(File.pathSeparator)) {
      File f = new File(dir, name);
      if (f.canExecute()) {
        return f.getPath();
      }
    }
    return null;
  }

  private static final List<ProcessManager> ALL = new ArrayList<>();
  private static Thread shutdownHook;

  private final Map<String, Process> processes = Collections.synchronizedMap(new HashMap<>());

  public static ProcessManager create() {
    return new ProcessManager();
  }

  private ProcessManager() {}

  /** A process started, to check that it still runs. */
  public static class RunningProcess {
    private final Process process;

    RunningProcess(Process process) {
      this.process = process;
    }

    /** Throws when the process has exited. */
    public void isAliveOrThrow() throws IllegalStateException {
      if (!process.isAlive()) {
        throw new IllegalStateException("Process died with exit code " + process.exitValue());
      }
    }

    Process getUnderlyingProcess() {
      return process;
    }
  }

  RunningProcess startProcess(String id, String command, List<String> args) throws IOException {
    return startProcess(id, command, args, Collections.emptyMap());
  }

  /** Starts command with args and env added to this process's environment, its output dropped. */
  public RunningProcess startProcess(
      String id, String command, List<String> args, Map<String, String> env) throws IOException {
    File out =
        LOG.isDebugEnabled() ? INHERIT_IO_FILE : new File(WINDOWS ? "nul" : "/dev/null");
    return startProcess(id, command, args, env, out);
  }

  /** Starts command with args and env, its output to outputFile (INHERIT_IO_FILE: this one's). */
  public RunningProcess startProcess(
      String id, String command, List<String> args, Map<String, String> env, File outputFile)
      throws IOException {
    if (id == null || command == null || args == null || env == null || outputFile == null) {
      throw new NullPointerException("id, command, args, env and outputFile must not be null");
    }
    List<String> cmd = new ArrayList<>();
    if (!WINDOWS) {
      if (SETSID != null) {
        cmd.add(SETSID);
      }
      cmd.add("/bin/sh");
      cmd.add("-c");
      cmd.add(WATCH);
      cmd.add("beam-worker");
    }
    cmd.add(command);
    cmd.addAll(args);
    ProcessBuilder pb = new ProcessBuilder(cmd);
    pb.environment().putAll(env);
    if (INHERIT_IO_FILE.equals(outputFile)) {
      pb.inheritIO();
    } else {
      pb.redirectErrorStream(true);
      pb.redirectOutput(outputFile);
    }
    Process p = pb.start();
    Process old = processes.put(id, p);
    synchronized (ALL) {
      if (!ALL.contains(this)) {
        ALL.add(this);
      }
      if (shutdownHook == null) {
        shutdownHook = new Thread(ProcessManager::stopAll, "beam-process-manager-shutdown");
        Runtime.getRuntime().addShutdownHook(shutdownHook);
      }
    }
    if (old != null) {
      stop(id, old);
      stop(id, p);
      throw new IllegalStateException("There was already a process running with id " + id);
    }
    return new RunningProcess(p);
  }

  /** Stops a process started with id, with its process group and descendants. */
  public void stopProcess(String id) {
    try {
      Process p = processes.remove(id);
      if (p == null) {
        throw new NullPointerException("Process for id does not exist: " + id);
      }
      stop(id, p);
    } finally {
      synchronized (ALL) {
        if (processes.isEmpty()) {
          ALL.remove(this);
        }
        if (ALL.isEmpty() && shutdownHook != null) {
          try {
            Runtime.getRuntime().removeShutdownHook(shutdownHook);
          } catch (IllegalStateException shuttingDown) {
            // The hook runs.
          }
          shutdownHook = null;
        }
      }
    }
  }

  private static void stop(String id, Process p) {
    List<ProcessHandle> descendants = new ArrayList<>();
    p.toHandle().descendants().forEach(descendants::add);
    // The shell kills the command's process group at once on SIGTERM.
    p.destroy();
    try {
      if (!p.waitFor(2, TimeUnit.SECONDS)) {
        LOG.info("Process for worker {} still running. Killing.", id);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    p.destroyForcibly();
    for (ProcessHandle d : descendants) {
      d.destroyForcibly();
    }
  }

  private static void stopAll() {
    List<Process> all = new ArrayList<>();
    synchronized (ALL) {
      for (ProcessManager m : ALL) {
        all.addAll(m.processes.values());
      }
    }
    for (Process p : all) {
      stop("(shutdown)", p);
    }
  }
}
