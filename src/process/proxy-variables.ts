// The environment variables that name a proxy, as curl, git, npm, pip and Node's fetch read them:
// one list for the sandbox, which points a run's CLI at the gateway's proxy, and for the agents'
// environment, which asks whether the operator set one.

/** The variables that name the proxy of HTTP and HTTPS requests. */
export const HTTP_PROXY_VARIABLES = ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"];

/** Every variable that names a proxy: the HTTP ones and curl's for any protocol. */
export const PROXY_VARIABLES = [...HTTP_PROXY_VARIABLES, "ALL_PROXY", "all_proxy"];

/** The variables that list the hosts reached without a proxy. */
export const NO_PROXY_VARIABLES = ["NO_PROXY", "no_proxy"];
