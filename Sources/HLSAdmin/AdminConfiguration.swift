import HLSKeys

/// Settings of the admin API (`/api/v1`, docs/api.md). YAML keys `api.token`, `api.allow`.
package struct AdminConfiguration: Sendable {
    /// Bearer token every API request must carry (`Authorization: Bearer …`), from loopback too; `nil` = none.
    package var token: String?
    /// Networks allowed besides loopback (`api.allow`, `serve --api-allow CIDR`).
    package var allowedNetworks: [IPNetwork] = []
    /// Events buffered per `/events` subscriber that does not read; past it progress is coalesced and dropped,
    /// and a subscriber that still cannot keep up with state changes is disconnected.
    package var maxBufferedEvents: Int = 256
    /// How often `items.sqlite` is compared for changes made by other processes (`hlscache fetch`).
    package var pollInterval: Duration = .seconds(1)
    /// Progress events per item are sent at most this often (the last one of a burst is always sent).
    package var progressInterval: Duration = .milliseconds(250)
    /// A comment line sent to every `/events` subscriber this often, so dead connections are noticed.
    package var heartbeatInterval: Duration = .seconds(15)
    /// At a stop, how long the event streams may take to write what is queued for them (`stopping` last) before they
    /// are closed (`serve`: `shutdown.grace`).
    package var stopWait: Duration = .seconds(2)

    /// Defaults: loopback only, no token.
    package init(token: String? = nil, allowedNetworks: [IPNetwork] = []) {
        self.token = token
        self.allowedNetworks = allowedNetworks
    }
}
