import Foundation
import HLSCacheCore
import HLSKeys
import HLSOrigin
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1

/// A stand-in origin for key fetches: no network, programmable answers, a request count.
final class FakeKeyOrigin: KeyFetcher {
    struct Answer: Sendable {
        var body: [UInt8]
        var headers: [(String, String)] = []
        var failure: OriginError?
        var delay: Duration = .zero
    }

    private let state: NIOLockedValueBox<(answer: Answer, count: Int, lastHeaders: [(String, String)])>

    init(body: [UInt8]) {
        state = NIOLockedValueBox((Answer(body: body), 0, []))
    }

    var count: Int { state.withLockedValue { $0.count } }
    /// The request headers of the last fetch.
    var lastHeaders: [(String, String)] { state.withLockedValue { $0.lastHeaders } }

    func set(_ change: (inout Answer) -> Void) {
        state.withLockedValue { change(&$0.answer) }
    }

    func fetch(_ url: OriginURL, headers: [(String, String)], maxBytes: Int) async throws(OriginError) -> OriginResponse {
        let answer = state.withLockedValue { state -> Answer in
            state.count += 1
            state.lastHeaders = headers
            return state.answer
        }
        if answer.delay > .zero { try? await Task.sleep(for: answer.delay) }
        if let failure = answer.failure { throw failure }
        var fields = HTTPHeaders()
        for (name, value) in answer.headers { fields.add(name: name, value: value) }
        return OriginResponse(head: OriginResponseHead(status: 200, headers: fields, url: url), body: ByteBuffer(bytes: answer.body))
    }
}

/// A clock the tests move by hand.
final class TestClock: Sendable {
    private let current = NIOLockedValueBox(Date(timeIntervalSince1970: 1_700_000_000))
    var now: Date { current.withLockedValue { $0 } }
    func advance(_ seconds: Double) { current.withLockedValue { $0 += seconds } }
}

/// A fresh temporary directory, removed by `cleanup()`.
struct TemporaryDirectory {
    let path: String
    init() {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("hlskeys-test-\(UUID().uuidString)").path
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    func cleanup() { try? FileManager.default.removeItem(atPath: path) }

    /// Whether `needle` occurs in any file under the directory.
    func containsBytes(_ needle: [UInt8]) -> Bool {
        guard let files = FileManager.default.enumerator(atPath: path) else { return false }
        for case let name as String in files {
            guard let data = FileManager.default.contents(atPath: path + "/" + name) else { continue }
            let bytes = [UInt8](data)
            guard bytes.count >= needle.count else { continue }
            for start in 0...(bytes.count - needle.count) where bytes[start] == needle[0] {
                if bytes[start..<(start + needle.count)].elementsEqual(needle) { return true }
            }
        }
        return false
    }
}
