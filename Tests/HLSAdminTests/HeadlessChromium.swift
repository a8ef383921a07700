import Foundation
import HLSTestSupport
import NIOConcurrencyHelpers

#if canImport(Glibc)
    import Glibc
#endif

/// Headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`: the browser reads
/// commands from its descriptor 3 and writes answers and events to its descriptor 4, each message a JSON object
/// followed by a NUL byte). Tests open a page, run script in it (fill a form, press a button, read the DOM) and take
/// screenshots, as a person at the browser would — no extra package, no port to find.
///
/// Every command waits for its answer at most 120 s (a bound for a stuck browser, not a measurement).
final class HeadlessChromium: @unchecked Sendable {
    struct ProtocolError: Error, CustomStringConvertible {
        var description: String
    }

    private let process: ChildProcess
    private let commands: Int32
    private let answers: Int32
    private let lock = NSLock()
    private var nextID = 1
    private var waiting: [Int: CheckedContinuation<Data, any Error>] = [:]
    private var closed = false
    /// The pages' console messages and uncaught exceptions, for failure messages.
    private let pageLog = NIOLockedValueBox<[String]>([])
    private let profile: URL

    /// Starts the browser (`--headless=new`, autoplay allowed, a fresh profile) with a window of `width`×`height`.
    init(executable: String, width: Int = 1280, height: Int = 1000) throws {
        profile = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-chromium-\(UUID().uuidString)")
        let arguments = [
            "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--mute-audio",
            "--autoplay-policy=no-user-gesture-required", "--remote-debugging-pipe", "--user-data-dir=\(profile.path)",
            "--window-size=\(width),\(height)", "--hide-scrollbars", "about:blank",
        ]
        var toBrowser: [Int32] = [0, 0]
        var fromBrowser: [Int32] = [0, 0]
        guard pipe(&toBrowser) == 0, pipe(&fromBrowser) == 0 else {
            throw ProtocolError(description: "pipe: \(String(cString: strerror(errno)))")
        }
        guard let devNull = FileHandle(forUpdatingAtPath: "/dev/null") else { throw ProtocolError(description: "cannot open /dev/null") }
        let child = ChildProcess()
        child.executableURL = URL(fileURLWithPath: executable)
        child.arguments = arguments
        (child.standardInput, child.standardOutput, child.standardError) = (devNull, devNull, devNull)
        // Its descriptor 3 reads the commands, 4 writes the answers; its own process group, so its helpers end with it.
        child.extraDescriptors = [toBrowser[0], fromBrowser[1]]
        defer {
            try? devNull.close()
            Glibc.close(toBrowser[0])
            Glibc.close(fromBrowser[1])
        }
        do {
            try child.run()
        } catch {
            Glibc.close(toBrowser[1])
            Glibc.close(fromBrowser[0])
            throw ProtocolError(description: "\(error)")
        }
        process = child
        commands = toBrowser[1]
        answers = fromBrowser[0]
        let reader = Thread { [self] in readLoop() }
        reader.name = "chromium-devtools"
        reader.start()
    }

    /// What the pages logged so far (console messages, exceptions).
    var log: [String] { pageLog.withLockedValue { $0 } }

    // MARK: - Protocol

    /// Sends `method` (to the browser, or to the page of `session`) and returns the answer's `result`.
    @discardableResult
    func send(_ method: String, _ params: [String: Any] = [:], session: String? = nil) async throws -> [String: Any] {
        var message: [String: Any] = ["method": method, "params": params]
        if let session { message["sessionId"] = session }
        let id = lock.withLock {
            defer { nextID += 1 }
            return nextID
        }
        message["id"] = id
        let bytes = [UInt8](try JSONSerialization.data(withJSONObject: message)) + [0]
        let data = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Data, any Error>) in
            let accepted = lock.withLock {
                guard !closed else { return false }
                waiting[id] = continuation
                return true
            }
            guard accepted else { return continuation.resume(throwing: ProtocolError(description: "the browser is gone")) }
            let written = bytes.withUnsafeBytes { buffer -> Bool in
                var offset = 0
                while offset < buffer.count {
                    let count = write(commands, buffer.baseAddress! + offset, buffer.count - offset)
                    if count < 0 && errno == EINTR { continue }
                    guard count > 0 else { return false }
                    offset += count
                }
                return true
            }
            if !written { fail(id, "cannot write to the browser: \(String(cString: strerror(errno)))") }
            Task { [weak self] in
                try? await Task.sleep(for: .seconds(120))
                self?.fail(id, "no answer to \(method) within 120 s")
            }
        }
        let answer = (try JSONSerialization.jsonObject(with: data) as? [String: Any]) ?? [:]
        if let error = answer["error"] as? [String: Any] {
            throw ProtocolError(description: "\(method): \(error["message"] ?? error)")
        }
        return answer["result"] as? [String: Any] ?? [:]
    }

    private func fail(_ id: Int, _ text: String) {
        let continuation = lock.withLock { waiting.removeValue(forKey: id) }
        continuation?.resume(throwing: ProtocolError(description: text))
    }

    private func readLoop() {
        var pending: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(answers, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            pending.append(contentsOf: buffer[0..<count])
            while let end = pending.firstIndex(of: 0) {
                let message = Data(pending[..<end])
                pending.removeSubrange(...end)
                dispatch(message)
            }
        }
        Glibc.close(answers)
        let orphans = lock.withLock {
            closed = true
            defer { waiting.removeAll() }
            return Array(waiting.values)
        }
        for continuation in orphans { continuation.resume(throwing: ProtocolError(description: "the browser closed its pipe")) }
    }

    private func dispatch(_ message: Data) {
        guard let object = try? JSONSerialization.jsonObject(with: message) as? [String: Any] else { return }
        if let id = object["id"] as? Int {
            let continuation = lock.withLock { waiting.removeValue(forKey: id) }
            continuation?.resume(returning: message)
            return
        }
        let params = object["params"] as? [String: Any] ?? [:]
        switch object["method"] as? String {
        case "Runtime.consoleAPICalled":
            let args = (params["args"] as? [[String: Any]] ?? []).map { "\($0["value"] ?? $0["description"] ?? "?")" }
            pageLog.withLockedValue { $0.append("console.\(params["type"] ?? "log"): \(args.joined(separator: " "))") }
        case "Runtime.exceptionThrown":
            let details = params["exceptionDetails"] as? [String: Any] ?? [:]
            let exception = details["exception"] as? [String: Any] ?? [:]
            pageLog.withLockedValue { $0.append("exception: \(exception["description"] ?? details["text"] ?? "?")") }
        case "Log.entryAdded":
            let entry = params["entry"] as? [String: Any] ?? [:]
            pageLog.withLockedValue { $0.append("log.\(entry["level"] ?? "?"): \(entry["text"] ?? "") \(entry["url"] ?? "")") }
        default:
            break
        }
    }

    // MARK: - Pages

    /// A page (a tab) attached to this browser.
    struct Page: Sendable {
        let browser: HeadlessChromium
        let session: String

        /// Runs `expression` in the page (awaiting a promise) and returns its value as JSON text (`null` for
        /// undefined). A thrown exception is an error.
        @discardableResult
        func evaluate(_ expression: String) async throws -> String {
            let result = try await browser.send(
                "Runtime.evaluate", ["expression": expression, "awaitPromise": true, "returnByValue": true], session: session)
            if let details = result["exceptionDetails"] as? [String: Any] {
                let exception = details["exception"] as? [String: Any] ?? [:]
                throw ProtocolError(description: "the page threw: \(exception["description"] ?? details["text"] ?? details)")
            }
            let value = (result["result"] as? [String: Any])?["value"] ?? NSNull()
            let data = try JSONSerialization.data(withJSONObject: ["v": value])
            let text = String(decoding: data, as: UTF8.self)
            return String(text.dropFirst(5).dropLast())
        }

        /// The page as a PNG of its viewport.
        func screenshot() async throws -> Data {
            let result = try await browser.send("Page.captureScreenshot", ["format": "png"], session: session)
            guard let base64 = result["data"] as? String, let data = Data(base64Encoded: base64) else {
                throw ProtocolError(description: "Page.captureScreenshot returned no image")
            }
            return data
        }
    }

    /// Opens `url` in a new tab and attaches to it, with its console and exceptions reported to ``log``.
    func open(_ url: String) async throws -> Page {
        let created = try await send("Target.createTarget", ["url": "about:blank"])
        guard let target = created["targetId"] as? String else { throw ProtocolError(description: "Target.createTarget: no targetId") }
        let attached = try await send("Target.attachToTarget", ["targetId": target, "flatten": true])
        guard let session = attached["sessionId"] as? String else {
            throw ProtocolError(description: "Target.attachToTarget: no sessionId")
        }
        try await send("Runtime.enable", session: session)
        try await send("Log.enable", session: session)
        try await send("Page.enable", session: session)
        try await send("Page.navigate", ["url": url], session: session)
        return Page(browser: self, session: session)
    }

    /// Ends the browser and its helpers, and removes its profile.
    func close() async {
        _ = try? await send("Browser.close")
        process.killGroup()
        await process.waitForExit()
        Glibc.close(commands)
        try? FileManager.default.removeItem(at: profile)
    }
}
