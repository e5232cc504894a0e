{{- /*
prodapi's alerting rules: the spec of the PrometheusRule, with the thresholds
and the runbooks' base URL from prometheusRule.*. Rendered at the default
values, they are deploy/monitoring/prometheus/rules.yaml, which the chart's
tests hold equal (go test -run TestMonitoringShipped -update in
deploy/helm/test writes it). Prometheus's own templates are escaped.
*/ -}}
{{- define "prodapi.prometheusRules" -}}
{{- $t := .Values.prometheusRule.thresholds }}
{{- $runbooks := trimSuffix "/" .Values.prometheusRule.runbookBaseURL -}}
groups:
  - name: prodapi
    rules:
      - alert: ProdapiAbsent
        expr: absent(up{job="prodapi"})
        for: 10m
        labels:
          severity: critical
        annotations:
          summary: No prodapi target is scraped at all.
          description: Prometheus has had no target in job "prodapi" for 10 minutes, so no other prodapi alert can fire.
          runbook_url: {{ $runbooks }}/ProdapiAbsent.md

      - alert: ProdapiTargetDown
        expr: up{job="prodapi"} == 0
        for: 5m
        labels:
          severity: warning
        annotations:
          summary: A prodapi replica cannot be scraped.
          description: "{{`{{ $labels.instance }}`}} has not answered /metrics for 5 minutes."
          runbook_url: {{ $runbooks }}/ProdapiTargetDown.md

      - alert: ProdapiHighErrorRatio
        expr: |
          sum by (namespace, job) (rate(prodapi_http_requests_total{code=~"5.."}[5m]))
            / sum by (namespace, job) (rate(prodapi_http_requests_total[5m]))
          > {{ divf $t.errorPercent 100 }}
        for: 10m
        labels:
          severity: critical
        annotations:
          summary: More than {{ $t.errorPercent }}% of prodapi's answers are server errors.
          description: "{{`{{ $value | humanizePercentage }}`}} of the requests answered in the last 5 minutes were 5xx."
          runbook_url: {{ $runbooks }}/ProdapiHighErrorRatio.md

      - alert: ProdapiHighLatency
        expr: |
          histogram_quantile(0.99,
            sum by (namespace, job, le) (rate(prodapi_http_request_duration_seconds_bucket{route!~"/healthz|/readyz|/metrics|unmatched"}[5m])))
          > {{ $t.latencySeconds }}
        for: 10m
        labels:
          severity: warning
        annotations:
          summary: prodapi's p99 latency is above {{ $t.latencySeconds }} s.
          description: "The 99th percentile of API requests (long polls and event streams, timed apart, aside) took {{`{{ $value | humanizeDuration }}`}} over the last 5 minutes."
          runbook_url: {{ $runbooks }}/ProdapiHighLatency.md

      - alert: ProdapiBackendErrors
        expr: |
          sum by (namespace, job, backend) (rate(prodapi_source_errors_total{kind!="invalid"}[5m]))
            / sum by (namespace, job, backend) (rate(prodapi_source_queries_total[5m]))
          > {{ divf $t.backendErrorPercent 100 }}
        for: 10m
        labels:
          severity: warning
        annotations:
          summary: "More than {{ $t.backendErrorPercent }}% of prodapi's {{`{{ $labels.backend }}`}} queries fail."
          description: "{{`{{ $value | humanizePercentage }}`}} of the queries to {{`{{ $labels.backend }}`}} failed (unavailable, timeout or other) in the last 5 minutes."
          runbook_url: {{ $runbooks }}/ProdapiBackendErrors.md

      - alert: ProdapiServingStale
        expr: |
          sum by (namespace, job) (rate(prodapi_cache_refreshes_total{result="error"}[5m])) > 0
          and
          sum by (namespace, job) (rate(prodapi_cache_requests_total{outcome="stale"}[5m])) > 0
        for: 10m
        labels:
          severity: warning
        annotations:
          summary: prodapi serves stale entries because their refreshes fail.
          description: Refreshes of expired entries have failed for 10 minutes while clients were served the stale copies.
          runbook_url: {{ $runbooks }}/ProdapiServingStale.md

      - alert: ProdapiRedisErrors
        expr: sum by (namespace, job) (rate(prodapi_cache_redis_errors_total[5m])) > {{ $t.redisErrorsPerSecond }}
        for: 10m
        labels:
          severity: warning
        annotations:
          summary: prodapi's calls to Redis fail.
          description: "{{`{{ $value | humanize }}`}} Redis calls per second failed or timed out over the last 5 minutes; each became a miss or a skipped write."
          runbook_url: {{ $runbooks }}/ProdapiRedisErrors.md

      - alert: ProdapiRedisBreakerOpen
        expr: prodapi_cache_redis_breaker_state == 1
        for: 5m
        labels:
          severity: warning
        annotations:
          summary: A prodapi replica has stopped asking Redis.
          description: "The Redis circuit breaker of {{`{{ $labels.instance }}`}} has been open for 5 minutes: it serves from its own memory and the backends."
          runbook_url: {{ $runbooks }}/ProdapiRedisBreakerOpen.md

      - alert: ProdapiChangeFeedLag
        expr: max by (namespace, job) (prodapi_cache_change_lag_seconds) > {{ $t.changeFeedLagSeconds }}
        for: 5m
        labels:
          severity: warning
        annotations:
          summary: prodapi applies the newsroom's writes late.
          description: "The change feed applied its latest change {{`{{ $value | humanizeDuration }}`}} after the database wrote it."
          runbook_url: {{ $runbooks }}/ProdapiChangeFeedLag.md

      - alert: ProdapiChangeFeedNoLeader
        expr: sum by (namespace, job) (prodapi_feed_leader) == 0
        for: 15m
        labels:
          severity: warning
        annotations:
          summary: No prodapi replica watches the database's change stream.
          description: For 15 minutes no replica has held the change-feed lease; entries refresh by TTL only.
          runbook_url: {{ $runbooks }}/ProdapiChangeFeedNoLeader.md

      - alert: ProdapiChangeLogUnavailable
        expr: prodapi_changes_following == 0
        for: {{ $t.changeLogUnavailableMinutes }}m
        labels:
          severity: warning
        annotations:
          summary: A prodapi replica cannot read the change log, and answers /changes 503.
          description: "{{`{{ $labels.instance }}`}} has not followed the change log for {{ $t.changeLogUnavailableMinutes }} minutes: its /changes answers and min_position reads are 503, and its event streams close."
          runbook_url: {{ $runbooks }}/ProdapiChangeLogUnavailable.md

      - alert: ProdapiChangeLogEpochEnded
        expr: sum by (namespace, job) (increase(prodapi_changes_epochs_ended_total[15m])) > 0
        labels:
          severity: warning
        annotations:
          summary: The change log lost entries it had handed out, and every /changes client resyncs.
          description: "The change log's epoch ended {{`{{ $value | humanize }}`}} times in 15 minutes: Redis lost entries clients had read (a restart on persistence lacking them, a failover to a replica lacking them), so every position is a 410 and every mirror walks the lists again."
          runbook_url: {{ $runbooks }}/ProdapiChangeLogEpochEnded.md

      - alert: ProdapiChangeLogAppendErrors
        expr: sum by (namespace, job, source) (rate(prodapi_changes_append_errors_total[5m])) > {{ $t.changeLogAppendErrorsPerSecond }}
        for: 10m
        labels:
          severity: warning
        annotations:
          summary: "prodapi cannot append the {{`{{ $labels.source }}`}} feed's changes to the change log."
          description: "{{`{{ $value | humanize }}`}} appends per second from the {{`{{ $labels.source }}`}} feed have failed for 10 minutes: the feed retries them in order and holds every later change, so /changes clients see nothing new."
          runbook_url: {{ $runbooks }}/ProdapiChangeLogAppendErrors.md

      - alert: ProdapiChangeLogApplyErrors
        expr: sum by (namespace, job, instance) (rate(prodapi_changes_apply_errors_total[5m])) > {{ $t.changeLogApplyErrorsPerSecond }}
        for: 10m
        labels:
          severity: warning
        annotations:
          summary: A prodapi replica cannot apply the change log's entries to its cache.
          description: "{{`{{ $labels.instance }}`}} has failed to apply change-log entries {{`{{ $value | humanize }}`}} times per second for 10 minutes: it retries the same entries, no later one counts as applied, and its /changes and min_position reads are 503."
          runbook_url: {{ $runbooks }}/ProdapiChangeLogApplyErrors.md

      - alert: ProdapiLogLinesDropped
        expr: increase(prodapi_log_lines_dropped_total[15m]) > 0
        labels:
          severity: warning
        annotations:
          summary: prodapi dropped log lines.
          description: "{{`{{ $labels.instance }}`}} dropped {{`{{ $value | humanize }}`}} log lines in 15 minutes because stderr was blocked."
          runbook_url: {{ $runbooks }}/ProdapiLogLinesDropped.md

      - alert: ProdapiPanics
        expr: increase(prodapi_http_panics_total[15m]) > 0
        labels:
          severity: warning
        annotations:
          summary: A prodapi handler panicked.
          description: "{{`{{ $labels.instance }}`}} recovered {{`{{ $value | humanize }}`}} handler panics in 15 minutes (each answered 500)."
          runbook_url: {{ $runbooks }}/ProdapiPanics.md

      - alert: ProdapiConnectionsShed
        expr: rate(prodapi_http_connections_shed_total{reason="full"}[5m]) > 0
        for: 5m
        labels:
          severity: warning
        annotations:
          summary: A prodapi replica refuses new connections.
          description: "{{`{{ $labels.instance }}`}} is at PRODAPI_MAX_CONNS with no idle connection to close: new connections are closed."
          runbook_url: {{ $runbooks }}/ProdapiConnectionsShed.md

      - alert: ProdapiPurgeFailed
        expr: increase(prodapi_admin_purges_total{result!="ok"}[15m]) > 0
        labels:
          severity: warning
        annotations:
          summary: A purge did not reach every replica.
          description: "{{`{{ $labels.instance }}`}} answered {{`{{ $value | humanize }}`}} purges of scope {{`{{ $labels.scope }}`}} with {{`{{ $labels.result }}`}} in 15 minutes."
          runbook_url: {{ $runbooks }}/ProdapiPurgeFailed.md

      - alert: ProdapiClientRateLimited
        expr: sum by (namespace, job, client) (rate(prodapi_rate_limited_total[5m])) > {{ $t.rateLimitedPerSecond }}
        for: 15m
        labels:
          severity: info
        annotations:
          summary: "prodapi refuses client {{`{{ $labels.client }}`}} at its rate limit, without pause."
          description: "{{`{{ $labels.client }}`}} has got {{`{{ $value | humanize }}`}} 429s per second for 15 minutes: it does not slow down on Retry-After, or its limit is too low for what it does."
          runbook_url: {{ $runbooks }}/ProdapiClientRateLimited.md

      - alert: ProdapiClientCapHit
        expr: sum by (namespace, job, cap) (rate(prodapi_cap_refusals_total{cap=~"client_loads|client_waits"}[5m])) > {{ $t.clientCapRefusalsPerSecond }}
        for: 15m
        labels:
          severity: info
        annotations:
          summary: "Clients are refused at their own {{`{{ $labels.cap }}`}} cap, without pause."
          description: "{{`{{ $value | humanize }}`}} requests per second have been answered 429 at a client's {{`{{ $labels.cap }}`}} cap (PRODAPI_CLIENT_MAX_LOADS, PRODAPI_CLIENT_MAX_WAITS) for 15 minutes."
          runbook_url: {{ $runbooks }}/ProdapiClientCapHit.md

      - alert: ProdapiGlobalCapHit
        expr: sum by (namespace, job, cap) (rate(prodapi_cap_refusals_total{cap=~"changes_polls|changes_streams"}[5m])) > 0
        for: 10m
        labels:
          severity: warning
        annotations:
          summary: "prodapi refuses long polls or event streams at its global {{`{{ $labels.cap }}`}} cap."
          description: "{{`{{ $value | humanize }}`}} requests per second have been answered 503 at the global {{`{{ $labels.cap }}`}} cap (PRODAPI_CHANGES_MAX_POLLS, PRODAPI_CHANGES_MAX_STREAMS) for 10 minutes, whichever client sent them."
          runbook_url: {{ $runbooks }}/ProdapiGlobalCapHit.md
{{- end }}
