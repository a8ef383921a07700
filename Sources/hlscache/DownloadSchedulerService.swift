import HLSDownloader
import ServiceLifecycle

/// Runs the ``DownloadScheduler`` of `hlscache serve` as a service: on SIGTERM/SIGINT its downloads are
/// cancelled, which leaves each running item `idle` (interrupted) with its complete files in the cache and no
/// partial file visible; the next `serve` or `fetch` resumes it.
struct DownloadSchedulerService: Service {
    let scheduler: DownloadScheduler

    func run() async throws {
        await cancelWhenGracefulShutdown {
            await scheduler.run()
        }
    }
}
