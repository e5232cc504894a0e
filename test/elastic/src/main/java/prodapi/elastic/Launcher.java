package prodapi.elastic;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.Collection;
import java.util.List;
import java.util.concurrent.CountDownLatch;

import org.codelibs.elasticsearch.runner.node.ClusterRunnerNode;
import org.elasticsearch.common.logging.LogConfigurator;
import org.elasticsearch.common.settings.Settings;
import org.elasticsearch.env.Environment;
import org.elasticsearch.node.InternalSettingsPreparer;
import org.elasticsearch.node.Node;
import org.elasticsearch.plugins.Plugin;

/**
 * Runs one Elasticsearch 7.10.2 node for prodapi's tests, in this JVM,
 * with the modules of the default OSS distribution loaded from the
 * classpath (Maven Central has them as jars, not as installed modules).
 *
 * <p>Usage: {@code Launcher <http port> <transport port> <home dir>}.
 * The node binds 127.0.0.1 only, runs as a single-node cluster, keeps
 * data and logs under the home dir, and ignores disk watermarks (a test
 * machine's disk may be nearly full). It runs until the JVM is told to
 * end (SIGTERM closes the node first) or, with
 * {@code -Dprodapi.exitOnStdinEOF=true}, until its standard input ends:
 * test/realserver holds a pipe to it, so a test binary that dies without
 * stopping the node (a panic, a timeout, kill -9) takes the node with it;
 * {@code -Dprodapi.deleteHomeOnExit=true} removes the home dir then too.
 */
public final class Launcher {
    private static final List<Class<? extends Plugin>> MODULES = Arrays.asList(
        org.elasticsearch.transport.Netty4Plugin.class,
        org.elasticsearch.analysis.common.CommonAnalysisPlugin.class,
        org.elasticsearch.painless.PainlessPlugin.class,
        org.elasticsearch.index.mapper.MapperExtrasPlugin.class,
        org.elasticsearch.index.reindex.ReindexPlugin.class,
        org.elasticsearch.join.ParentJoinPlugin.class,
        org.elasticsearch.percolator.PercolatorPlugin.class,
        org.elasticsearch.script.mustache.MustachePlugin.class,
        org.elasticsearch.script.expression.ExpressionPlugin.class,
        org.elasticsearch.search.aggregations.matrix.MatrixAggregationPlugin.class,
        org.elasticsearch.index.rankeval.RankEvalPlugin.class,
        org.elasticsearch.ingest.common.IngestCommonPlugin.class,
        org.elasticsearch.ingest.useragent.IngestUserAgentPlugin.class,
        org.elasticsearch.plugin.repository.url.URLRepositoryPlugin.class);

    private static final String LOG4J =
        "status = error\n"
            + "appender.console.type = Console\n"
            + "appender.console.name = console\n"
            + "appender.console.layout.type = PatternLayout\n"
            + "appender.console.layout.pattern = [%d{ISO8601}][%-5p][%-25c{1.}] %m%n\n"
            + "rootLogger.level = info\n"
            + "rootLogger.appenderRef.console.ref = console\n"
            // Deprecation warnings are for the API's callers, not the log.
            + "logger.deprecation.name = org.elasticsearch.deprecation\n"
            + "logger.deprecation.level = error\n";

    private Launcher() {}

    /** Deletes dir and everything below it, deepest first. */
    private static void deleteTree(Path dir) throws java.io.IOException {
        try (java.util.stream.Stream<Path> paths = Files.walk(dir)) {
            for (Path p : (Iterable<Path>) paths.sorted(java.util.Comparator.reverseOrder())::iterator) {
                Files.deleteIfExists(p);
            }
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: Launcher <http port> <transport port> <home dir>");
            System.exit(2);
        }
        Path home = Paths.get(args[2]).toAbsolutePath();
        Path config = home.resolve("config");
        Files.createDirectories(config);
        Files.write(config.resolve("log4j2.properties"), LOG4J.getBytes("UTF-8"));
        Files.write(config.resolve("elasticsearch.yml"), new byte[0]);
        Files.createDirectories(home.resolve("plugins"));

        Settings settings = Settings.builder()
            .put("path.home", home.toString())
            .put("path.data", home.resolve("data").toString())
            .put("path.logs", home.resolve("logs").toString())
            .put("cluster.name", "prodapi-test")
            .put("node.name", "prodapi-test")
            .put("network.host", "127.0.0.1")
            .put("http.port", args[0])
            .put("transport.port", args[1])
            .put("discovery.type", "single-node")
            .put("cluster.routing.allocation.disk.threshold_enabled", false)
            .put("bootstrap.memory_lock", false)
            .build();
        Environment env = InternalSettingsPreparer.prepareEnvironment(settings, java.util.Collections.emptyMap(), config, () -> "prodapi-test");
        LogConfigurator.registerErrorListener();
        LogConfigurator.setNodeName("prodapi-test");
        LogConfigurator.configure(env);

        Collection<Class<? extends Plugin>> plugins = MODULES;
        Node node = new ClusterRunnerNode(env, plugins);
        CountDownLatch closed = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                node.close();
                if (Boolean.getBoolean("prodapi.deleteHomeOnExit")) {
                    deleteTree(home);
                }
            } catch (Exception e) {
                e.printStackTrace();
            } finally {
                closed.countDown();
            }
        }, "prodapi-es-shutdown"));
        if (Boolean.getBoolean("prodapi.exitOnStdinEOF")) {
            Thread watch = new Thread(() -> {
                try {
                    while (System.in.read() >= 0) {
                        // The parent writes nothing; only EOF matters.
                    }
                } catch (Exception e) {
                    // A broken pipe means the parent is gone too.
                }
                System.exit(0); // runs the shutdown hook: the node closes
            }, "prodapi-es-parent-watch");
            watch.setDaemon(true);
            watch.start();
        }
        node.start();
        System.out.println("prodapi-es: started on 127.0.0.1:" + args[0]);
        closed.await();
    }
}
