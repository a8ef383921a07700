import HLSCacheCore
import HLSKeys
import Logging
import NIOCore
import NIOHTTP1

/// Answers `/keys/{keyid}` (docs/design.md §7): only to clients the access policy allows, from the key service
/// (stored copy or origin), as 16 bytes that no cache may keep.
final class KeyEndpoint: Sendable {
    private let services: ProxyServices

    init(services: ProxyServices) {
        self.services = services
    }

    /// Whether the client may receive keys: at loopback or inside `keys.allow`, and not a web page
    /// `http.allowedWebOrigins` refuses (a hostile page in a browser on this machine is a loopback client too).
    static func allows(_ request: ProxyRequest, keys: KeyService) -> Bool {
        !request.page.isRefused && allows(peer: request.remoteAddress, keys: keys)
    }

    /// Whether the client at `peer` may receive keys: loopback, or inside `keys.allow`.
    static func allows(peer: SocketAddress?, keys: KeyService) -> Bool {
        keys.access.allows(peer: peer?.ipAddress)
    }

    func handle(_ request: ProxyRequest, id text: Substring, responder: Responder) {
        let keys = services.keys
        if case .refused(let page) = request.page {
            services.logger.notice("key request from a web page refused", metadata: ["page": "\(page)"])
            responder.send(error: ProxyError.pageNotAllowed(page))
            return
        }
        guard KeyEndpoint.allows(request, keys: keys) else {
            services.logger.notice("key request from \(request.remoteAddress?.ipAddress ?? "an unknown peer") refused")
            responder.send(error: KeyError.forbidden)
            return
        }
        let idText = text.firstIndex(where: { $0 == "/" || $0 == "?" }).map { text[..<$0] } ?? text
        guard let id = KeyID(idText) else {
            responder.send(error: KeyError.notFound.with("key ids are 32 hexadecimal digits"))
            return
        }
        // `/keys/{id}/https/host/path`: the key URL rides along, so a server that has not registered the key (another
        // node of a fleet, a restart) can; the id must be the URL's, or the path names something else.
        var unregistered: OriginURL?
        if idText.endIndex < text.endIndex, text[idText.endIndex] == "/" {
            guard let url = try? OriginURL(proxyTarget: String(text[idText.endIndex...])), keys.id(for: url) == id else {
                responder.send(error: KeyError.notFound.with("the URL after the key id is not the key's"))
                return
            }
            if keys.registeredID(for: url) == nil { unregistered = url }
        }
        let eventLoop = responder.eventLoop
        let logger = services.logger
        let toRegister = unregistered
        services.runBlocking(on: eventLoop) { () throws(KeyError) -> [UInt8]? in
            if let toRegister { try keys.register(toRegister) }
            return try keys.storedKey(id)
        }.whenComplete { result in
            switch result {
            case .success(let bytes?):
                KeyEndpoint.send(bytes, to: responder)
            case .success(nil):
                KeyEndpoint.fetch(id, keys: keys, responder: responder, logger: logger)
            case .failure(let error):
                let mapped = (error as? KeyError) ?? KeyError.storage.with("\(error)")
                logger.info("key \(id): \(mapped.message)")
                responder.send(error: mapped)
            }
        }
    }

    private static func send(_ bytes: [UInt8], to responder: Responder) {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/octet-stream")
        headers.add(name: "Content-Length", value: String(bytes.count))
        headers.add(name: "Cache-Control", value: "no-store")
        responder.send(status: .ok, headers: headers, body: .bytes(ByteBuffer(bytes: bytes)))
    }

    /// Pending, expired or unreadable: fetch (shared with concurrent requests for the same key).
    private static func fetch(_ id: KeyID, keys: KeyService, responder: Responder, logger: Logger) {
        let eventLoop = responder.eventLoop
        Task {
            let result: Result<[UInt8], KeyError>
            do throws(KeyError) {
                result = .success(try await keys.key(id))
            } catch {
                result = .failure(error)
            }
            eventLoop.execute {
                switch result {
                case .success(let bytes):
                    KeyEndpoint.send(bytes, to: responder)
                case .failure(let error):
                    logger.info("key \(id): \(error.message)")
                    responder.send(error: error)
                }
            }
        }
    }
}
