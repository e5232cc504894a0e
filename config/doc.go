// Package config loads the service's configuration from environment
// variables, in one place, with the original's defaults where it had the
// setting, and reports every problem at once. Secrets never print.
//
// The variables are the table of Settings, which `prodapi help` prints
// with each one's default and `prodapi config` with each one's effective
// value (Setting.Shown: a value refused as set, marked invalid with the
// reason, never the default it fell back on); the README explains them. LoadFrom refuses a PRODAPI_ variable
// that is not in the table (with a "did you mean" when one is near) and
// settings that contradict each other. Another variable one edit from a
// setting's name (a swap of two letters is one edit), or the name in
// another case, gets a "did you mean" warning (Config.Warnings), not a
// refusal: it may be another program's. Neither check judges Kubernetes'
// service links (<SERVICE>_SERVICE_HOST, <SERVICE>_PORT=tcp://...) or
// the variables Superdesk reads (superdesk.go), so prodapi can share a
// pod's or a Superdesk deployment's environment.
//
// The service listens on up to three addresses: PORT (or run's -addr),
// the API alone; PRODAPI_OPS_ADDR (DefaultOpsAddr, :5502), the operator
// listener, which serves /healthz, /readyz and /metrics without
// authentication; and PRODAPI_ADMIN_ADDR, when set, the admin listener
// (POST /purge, behind PRODAPI_ADMIN_SECRET). The admin and operator
// listeners may not share an address.
//
// PRODAPI_TRUSTED_PROXY_HEADER without PRODAPI_TRUSTED_PROXIES starts,
// with a warning (Config.Warnings): the header is then believed from any
// peer. The ranges without the header stop the start.
//
// Without PRODAPI_URL, the base URL is http://localhost:$PORT; once the
// service listens, Config.Listening moves it (and the default
// MEDIA_PREFIX built on it) to the port actually listened on.
//
// PRODAPI_TOKEN_URL, Superdesk's auth server's token endpoint, is offered
// by the reference page for OAuth 2 client credentials, and its origin is
// named in the page's Content-Security-Policy: it must be an http(s) URL
// without credentials whose host is a name or an address.
//
// The caps of /changes and of each client: PRODAPI_CHANGES_MAX_STREAMS
// and PRODAPI_CHANGES_MAX_POLLS are a replica's (at least 1 each);
// PRODAPI_CLIENT_MAX_WAITS is a client's streams, long polls and
// min_position waits across the fleet (0: no cap);
// PRODAPI_CHANGES_MAX_STREAM_AGE, at least a minute, ends every stream
// that long after it opened.
//
// Durations take Go syntax (10s, 5m) or a number of seconds; rate limits
// a number of events per second, minute or hour (600/s, 100/h) or off.
package config
