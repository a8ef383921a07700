import Foundation
import HLSTestSupport
import NIOCore
import NIOSSL
import Testing

/// HTTPS origins: a ``TestOrigin`` behind TLS with a certificate for 127.0.0.1 that a test CA (made with the
/// `openssl` command) signed. The system's trust store does not know that CA, so by default the origin is refused
/// with an honest 502 `tls`; `origin.caFile` (``OriginConfiguration/extraTrustRootsFile``) makes it trusted.
@Suite struct HTTPSOriginTests {
    struct Certificates {
        let directory: URL
        var ca: String { directory.appendingPathComponent("ca.pem").path }
        /// The leaf `name` (`ip`: for IP 127.0.0.1; `other`: for the name other.hlscache.test only).
        func leaf(_ name: String) -> String { directory.appendingPathComponent("\(name).pem").path }
        func leafKey(_ name: String) -> String { directory.appendingPathComponent("\(name).key").path }
    }

    /// A CA and two leaves it signed, valid for a day: `ip` for 127.0.0.1, `other` for another name.
    static func certificates() async throws -> Certificates {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let certs = Certificates(directory: dir)
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        let caKey = dir.appendingPathComponent("ca.key").path
        try await offThread {
            try FFmpeg.run(
                "/usr/bin/openssl",
                ["req", "-x509"] + ec + [
                    "-keyout", caKey, "-out", certs.ca, "-days", "1", "-subj", "/CN=hlscache test CA",
                    "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                ])
            for (name, san) in [("ip", "IP:127.0.0.1"), ("other", "DNS:other.hlscache.test")] {
                let ext = dir.appendingPathComponent("\(name).ext").path
                let csr = dir.appendingPathComponent("\(name).csr").path
                try Data("subjectAltName=\(san)\nbasicConstraints=CA:FALSE\n".utf8).write(to: URL(fileURLWithPath: ext))
                try FFmpeg.run("/usr/bin/openssl", ["req"] + ec + ["-keyout", certs.leafKey(name), "-out", csr, "-subj", "/CN=\(name)"])
                try FFmpeg.run(
                    "/usr/bin/openssl",
                    [
                        "x509", "-req", "-in", csr, "-CA", certs.ca, "-CAkey", caKey, "-CAcreateserial", "-out", certs.leaf(name),
                        "-days", "1", "-extfile", ext,
                    ])
            }
        }
        return certs
    }

    /// A TLS origin serving `dir` with the leaf `leaf`.
    static func httpsOrigin(serving dir: URL, _ certs: Certificates, leaf: String = "ip") throws -> TestOrigin {
        TestOrigin(root: dir, channelSetup: try tlsSetup(certs, leaf: leaf))
    }

    /// Adds a TLS server handler with the leaf `leaf` to an accepted connection, offering `protocols` in ALPN.
    static func tlsSetup(_ certs: Certificates, leaf: String = "ip", protocols: [String] = []) throws
        -> @Sendable (any Channel) throws -> Void
    {
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(certs.leaf(leaf)).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: certs.leafKey(leaf), format: .pem)))
        configuration.applicationProtocols = protocols
        let context = try NIOSSLContext(configuration: configuration)
        return { channel in try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context)) }
    }

    /// Certificates, a directory with `seg0.ts` (its bytes), and a started HTTPS origin serving it with the `ip` leaf.
    static func servedOverTLS() async throws -> (Certificates, URL, [UInt8], TestOrigin) {
        let certs = try await certificates()
        let (dir, segment) = try fixture()
        let origin = try httpsOrigin(serving: dir, certs)
        try await origin.start()
        return (certs, dir, segment, origin)
    }

    static func fixture() throws -> (URL, [UInt8]) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-https-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let segment = randomBytes(200_000)
        try Data(segment).write(to: dir.appendingPathComponent("seg0.ts"))
        return (dir, segment)
    }

    @Test func anOriginSignedByAnUnknownCAIsRefusedWithATLSError() async throws {
        let (certs, dir, _, origin) = try await Self.servedOverTLS()
        defer { try? FileManager.default.removeItem(at: dir); try? FileManager.default.removeItem(at: certs.directory) }
        let harness = try await ProxyHarness.start(origin: origin)
        defer { Task { await harness.shutdown() } }
        let refused = try await harness.get("\(harness.base)/https/127.0.0.1:\(origin.port)/seg0.ts")
        #expect(refused.status == 502)
        #expect(refused.text.contains("\"error\":\"tls\""), "\(refused.text)")
        #expect(origin.requests.isEmpty, "no request is sent over an unverified connection")
        try await harness.waitForIdle()
        #expect(try harness.store.usage().count == 0)
    }

    @Test func anExtraTrustedCAMakesTheOriginPlayAndCache() async throws {
        let (certs, dir, segment, origin) = try await Self.servedOverTLS()
        defer { try? FileManager.default.removeItem(at: dir); try? FileManager.default.removeItem(at: certs.directory) }
        let harness = try await ProxyHarness.start(origin: origin, configureOrigin: { $0.extraTrustRootsFile = certs.ca })
        defer { Task { await harness.shutdown() } }
        let url = "\(harness.base)/https/127.0.0.1:\(origin.port)/seg0.ts"
        let miss = try await harness.get(url)
        #expect(miss.status == 200)
        #expect(miss.headers.first(name: "X-Cache") == "MISS")
        #expect(sameBytes(miss.body, segment), "\(miss.body.count) bytes")
        try await harness.waitForIdle()
        let hit = try await harness.get(url)
        #expect(hit.headers.first(name: "X-Cache") == "HIT")
        #expect(sameBytes(hit.body, segment), "\(hit.body.count) bytes")
        #expect(origin.requests.count == 1)
        // A path whose escapes are no UTF-8 text goes out on a raw exchange: over TLS too, verified the same way.
        origin.setBody(segment, contentType: "video/mp2t", for: "/seg%E9.ts")
        let rawPath = "GET /https/127.0.0.1:\(origin.port)/seg%E9.ts HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        let (rawAnswer, _) = try await RawHTTP.exchangeBytes(port: harness.port, Array(rawPath.utf8), readTimeout: 60)
        #expect(String(decoding: rawAnswer.prefix(15), as: UTF8.self) == "HTTP/1.1 200 OK")
        #expect(sameBytes(rawAnswer.suffix(segment.count), segment))
        #expect(origin.requests.map(\.path) == ["/seg0.ts", "/seg%E9.ts"])
        // Verification stays on: a certificate the trusted CA signed for another name is refused.
        let other = try Self.httpsOrigin(serving: dir, certs, leaf: "other")
        try await other.start()
        let wrongName = try await harness.get("\(harness.base)/https/127.0.0.1:\(other.port)/seg0.ts")
        #expect(wrongName.status == 502)
        #expect(wrongName.text.contains("\"error\":\"tls\""), "\(wrongName.text)")
        let otherRaw = "GET /https/127.0.0.1:\(other.port)/seg%E9.ts HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        let (wrongNameRaw, _) = try await RawHTTP.exchange(port: harness.port, Array(otherRaw.utf8), readTimeout: 60)
        #expect(wrongNameRaw.hasPrefix("HTTP/1.1 502"), "\(wrongNameRaw.prefix(300))")
        #expect(wrongNameRaw.contains("\"error\":\"tls\""), "\(wrongNameRaw)")
        #expect(other.requests.isEmpty)
        await other.stop()
    }
}
