import HLSCacheCore
import NIOCore

extension OriginClient {
    /// Reads a whole small response (playlist, key) into memory.
    ///
    /// - Parameter maxBytes: the largest body accepted; a larger `Content-Length`, or more bytes than this,
    ///   fails with `OriginError.tooLarge` without reading the rest.
    /// - Returns: the response for 2xx and 304.
    /// - Throws: `OriginError.httpStatus(status)` for any other final status (after redirects and retries),
    ///   or the error that ended the request. Cancelling the Swift task cancels the request.
    package func fetch(_ url: OriginURL, headers: [(String, String)] = [], maxBytes: Int) async throws(OriginError) -> OriginResponse {
        try await fetch(url, headers: headers, maxBytes: maxBytes, refreshingCookies: true)
    }

    /// ``fetch(_:headers:maxBytes:)``; `refreshingCookies: false` for the page of a cookie refresh itself.
    func fetch(_ url: OriginURL, headers: [(String, String)], maxBytes: Int, refreshingCookies: Bool) async throws(OriginError)
        -> OriginResponse
    {
        let eventLoop = eventLoopGroup.next()
        let collector = OriginResponseCollector(maxBytes: maxBytes, eventLoop: eventLoop)
        let task = stream(url, method: .GET, headers: headers, on: eventLoop, refreshingCookies: refreshingCookies, handler: collector)
        let result: Result<OriginResponse, OriginError> = await withTaskCancellationHandler {
            do {
                return .success(try await collector.futureResponse.get())
            } catch let error as OriginError {
                return .failure(error)
            } catch {
                return .failure(OriginError.network.with("\(error)"))
            }
        } onCancel: {
            task.cancel()
        }
        let response = try result.get()
        guard (200...299).contains(response.status) || response.status == 304 else {
            throw OriginError.httpStatus(response.head).with("\(response.head.url.host) answered \(response.status)")
        }
        return response
    }
}
