import ArgumentParser
import HLSCacheCore
import HLSDownloader

/// `hlscache resume ID`: continues a paused, interrupted or failed item (or re-checks a cached one) in the
/// foreground, or queues it for `serve` with `--detach`.
struct ResumeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "resume", abstract: "Resume an item's download.")

    @OptionGroup var cache: CacheOptions

    @OptionGroup var selection: ItemSelection

    @Flag(name: .long, help: "Queue it and return; a running `hlscache serve` downloads it.")
    var detach = false

    @Flag(name: .long, help: "When the origin is unavailable (unreachable, 5xx, 429) after the retries, fail instead of waiting for it.")
    var failFast = false

    @Flag(name: .long, help: "Print JSON lines.")
    var json = false

    @Option(name: .long, help: "Bandwidth cap for this process, bytes per second (e.g. 2MiB).")
    var rate: String?

    @OptionGroup var origins: OriginOptions

    @OptionGroup var proxyBase: ProxyBaseOption

    func run() async throws {
        if let rate, ByteSize(rate).map({ $0.bytes > 0 }) != true {
            throw ValidationError("--rate \(rate): expected a size per second, e.g. 2MiB")
        }
        // Many items: queued for `serve` (as the batch endpoint does), not downloaded here one by one.
        guard let id = selection.single else { return try await selection.run(.resume, verb: "resume", cache: cache) }
        let printer = ProgressPrinter(json: json)
        try await ItemContext.with(
            cache, origins: origins, rate: rate.flatMap(ByteSize.init)?.bytes, failFast: failFast, onEvent: { printer.handle($0) }
        ) { context in
            let current = try context.items.require(id)
            if current.state != .idle && current.state != .queued {
                try context.downloader.resume(id)
            }
            if detach {
                printer.emit("\(id): queued")
                return
            }
            try await ForegroundDownload.run(id, context: context, printer: printer, proxyBase: proxyBase.base(context))
        }
    }
}
