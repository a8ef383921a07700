import Foundation
import HLSTestSupport
import NIOConcurrencyHelpers

/// Collects API responses and validates them against docs/openapi.yaml with `openapi_validate.py`
/// (python3 with PyYAML and jsonschema; `make test-deps` installs them).
final class OpenAPIRecords: Sendable {
    /// Each record as JSON text (`Any` is not Sendable).
    private let records = NIOLockedValueBox<[String]>([])

    static let testsDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    static let spec = testsDirectory.appendingPathComponent("../../docs/openapi.yaml").standardized

    /// A response of `method` on the documented `path` (e.g. `/items/{id}`).
    func add(_ method: String, _ path: String, _ response: AdminHarness.Response) {
        let body: Any = response.jsonValue ?? NSNull()
        append(["method": method.lowercased(), "path": path, "status": response.status, "body": body])
    }

    /// An event payload checked against `components/schemas/NAME`.
    func add(event: EventRecorder.Event) {
        let schema =
            [
                "state": "StateEvent", "progress": "ProgressEvent", "evicted": "EvictedEvent", "removed": "RemovedEvent",
                "played": "PlayedEvent",
                "policy": "PolicyEvent", "server": "ServerEvent",
                "lock": "LockEvent",
            ][event.type] ?? "Unknown"
        append(["schema": schema, "body": event.json])
    }

    /// A JSON body checked against `components/schemas/NAME` (a webhook's).
    func add(schema: String, body: String) {
        let json = (try? JSONSerialization.jsonObject(with: Data(body.utf8))) ?? NSNull()
        append(["schema": schema, "body": json])
    }

    private func append(_ record: [String: Any]) {
        let data = (try? JSONSerialization.data(withJSONObject: record)) ?? Data("{}".utf8)
        let text = String(decoding: data, as: UTF8.self)
        records.withLockedValue { $0.append(text) }
    }

    var count: Int { records.withLockedValue { $0.count } }

    /// Runs the validator; returns its exit status and output.
    func validate() async throws -> (status: Int32, output: String) {
        let list = records.withLockedValue { $0 }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("openapi-records-\(UUID().uuidString).json")
        try Data(("[" + list.joined(separator: ",") + "]").utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let script = Self.testsDirectory.appendingPathComponent("openapi_validate.py").path
        return try await offThread {
            let process = ChildProcess()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["python3", script, Self.spec.path, file.path]
            let out = Pipe()
            process.standardOutput = out
            process.standardError = out
            try process.run()
            let data = out.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return (process.terminationStatus, String(decoding: data, as: UTF8.self))
        }
    }
}
