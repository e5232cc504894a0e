// Package config loads the service's configuration from environment
// variables, in one place, with the original's defaults where it had the
// setting, and reports every problem at once. Secrets never print.
//
// The variables are the table of Settings, which `prodapi help` prints
// with each one's default and `prodapi config` with each one's effective
// value; the README explains them. LoadFrom refuses a PRODAPI_ variable
// that is not in the table (with a "did you mean" when one is near) and
// settings that contradict each other.
//
// Durations take Go syntax (10s, 5m) or a number of seconds.
package config
