// Package elastic is the Elasticsearch adapter: lists of the search
// resources (items, contacts, events, planning, assignments) and the
// enrichment lookups marked Search, read from Superdesk's indexes
// <ELASTICSEARCH_INDEX>_<collection> (superdesk_archive, ...). Import it
// as essrc.
package elastic
