import HLSCacheCore
import HLSCacheStore

/// Where ``ResourceService`` hands a miss to slices (docs/architecture.md, "Slices"): a `Range` request that no
/// download in flight can serve, and a whole-object request for an object stored as slices. Everything else about
/// slices is in ``SliceStitcher`` and ``SliceRun``.
final class SliceService: Sendable {
    private let services: ProxyServices
    /// How objects are cut (`cache.sliceSize`).
    let layout: SliceLayout

    init(services: ProxyServices) {
        self.services = services
        self.layout = SliceLayout(sliceSize: services.configuration.sliceSize)
    }

    /// A `Range` request on a miss: the slices it covers, from the store or the origin (a suffix range with nothing
    /// stored: the origin's answer to a slightly longer suffix tells the size, ``SliceRun``). `withoutSlices` answers it
    /// as before slices existed (a range relay and a background fill) when the origin ignores `Range`, the object is
    /// small, or the range is of several parts and nothing is stored.
    /// `backgroundFill` starts the whole object's fill when the answer shows a small object, which is relayed.
    func rangeMiss(
        _ request: ProxyRequest, key: CacheKey, url: OriginURL, range: String, responder: Responder, backgroundFill: @escaping () -> Void,
        withoutSlices: @escaping () -> Void
    ) {
        let stored = services.store.sliceSet(of: key, layout: layout)
        SliceStitcher(
            services: services, layout: layout, key: key, url: url, request: request, responder: responder, rangeHeader: range,
            onRelay: backgroundFill, fallback: withoutSlices
        ).start(with: stored)
    }

    /// A whole-object GET or HEAD on a miss: answered by stitching the object's slices when it is stored as slices
    /// (missing ones fetched on the way). False when it is not: the caller fetches it whole.
    func wholeMiss(_ request: ProxyRequest, key: CacheKey, url: OriginURL, responder: Responder, withoutSlices: @escaping () -> Void)
        -> Bool
    {
        guard let stored = services.store.sliceSet(of: key, layout: layout) else { return false }
        SliceStitcher(
            services: services, layout: layout, key: key, url: url, request: request, responder: responder, rangeHeader: nil,
            fallback: withoutSlices
        ).start(with: stored)
        return true
    }
}
