import ArgumentParser
import AsyncHTTPClient
import HLSConfig
import HLSOrigin

/// Options for talking to origins, shared by every command that fetches.
struct OriginOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "A header sent to one origin, as HOST=NAME: VALUE (HOST or HOST:PORT); repeatable. Example: 'cdn.example.com=X-Token: abc'.",
            valueName: "HOST=HEADER"))
    var originHeader: [String] = []

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Only proxy these origin hosts (repeatable; default: any host; origin.allowedHosts). Link-local and metadata addresses are refused either way.",
            valueName: "HOST"))
    var allowHost: [String] = []

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Reach origins through this HTTP proxy, with Basic proxy authentication when a user is given, or a SOCKS5 proxy as socks5://HOST:PORT (origin.proxy; a password here shows in ps: prefer HLSCACHE_ORIGIN_PROXY).",
            valueName: "[USER:PASSWORD@]HOST:PORT"))
    var upstreamProxy: String?

    @Option(
        name: .long,
        help: ArgumentHelp("Also trust the certificate authorities in this PEM file for https origins (origin.caFile).", valueName: "FILE"))
    var originCa: String?

    /// The flags given, as settings (`origin.allowedHosts`, `origin.proxy`, `origin.caFile`, per-origin headers).
    func add(to settings: inout CommandLineSettings) throws {
        settings.set("origin.allowedHosts", allowHost.map { $0.lowercased() })
        settings.set("origin.proxy", upstreamProxy)
        settings.set("origin.caFile", originCa)
        for spec in originHeader {
            guard let (host, name, value) = OriginOptions.parse(spec) else {
                throw ValidationError("--origin-header \(spec.split(separator: ":").first ?? ""): expected HOST=NAME: VALUE")
            }
            settings.originHeaders.append((host, HLSCacheSettings.Field(name: name, value: value)))
        }
    }

    /// `host=Name: value` → (lowercased host, name, value).
    static func parse(_ spec: String) -> (host: String, name: String, value: String)? {
        guard let equals = spec.firstIndex(of: "=") else { return nil }
        let host = spec[..<equals].trimmingCharacters(in: .whitespaces).lowercased()
        let header = spec[spec.index(after: equals)...]
        guard let colon = header.firstIndex(of: ":") else { return nil }
        let name = header[..<colon].trimmingCharacters(in: .whitespaces)
        let value = header[header.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        let token = name.utf8.allSatisfy { $0 > 32 && $0 < 127 && $0 != UInt8(ascii: ":") }
        guard !host.isEmpty, !name.isEmpty, token, !value.contains("\r"), !value.contains("\n") else { return nil }
        return (host, name, value)
    }
}
