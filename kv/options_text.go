package kv

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/adaptkv/adaptkv/sstable"
)

// fixRuleNames are FixRule's names in text.
var fixRuleNames = [...]string{FixDefault: "default", FixEvery: "every", FixRepeated: "repeated", FixAuto: "auto", FixCached: "cached"}

// String names the rule ("every", "repeated", "auto", "cached").
func (r FixRule) String() string {
	if int(r) < len(fixRuleNames) {
		return fixRuleNames[r]
	}
	return fmt.Sprintf("FixRule(%d)", uint8(r))
}

// recordRuleNames are RecordRule's names in text.
var recordRuleNames = [...]string{RecordAuto: "auto", RecordAlways: "always", RecordNever: "never", RecordWhileRewriting: "rewriting"}

// String names the rule ("auto", "always", "never", "rewriting").
func (r RecordRule) String() string {
	if int(r) < len(recordRuleNames) {
		return recordRuleNames[r]
	}
	return fmt.Sprintf("RecordRule(%d)", uint8(r))
}

// String returns the options as text, one "name=value" line per option
// under an "[Options]" header, in the order of the Options struct, names
// in snake case (block_cache_size=8388608): what ParseOptions reads back
// and what Open writes to the store's OPTIONS file (with defaults filled
// in). Options that are not values (Filter, EventListener, Logger, FS)
// are left out; a Filter is named in a comment line.
func (o *Options) String() string {
	var b strings.Builder
	b.WriteString("[Options]\n")
	if o.Filter != nil {
		fmt.Fprintf(&b, "  # filter: %s (Options.Filter, not parsed)\n", o.Filter.Name())
	}
	v := reflect.ValueOf(o).Elem()
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		text, ok := optionText(v.Field(i))
		if ok {
			fmt.Fprintf(&b, "  %s=%s\n", snakeCase(f.Name), text)
		}
	}
	return b.String()
}

func optionText(v reflect.Value) (string, bool) {
	switch x := v.Interface().(type) {
	case sstable.Format:
		return x.String(), true
	case FixRule:
		return x.String(), true
	case RecordRule:
		return x.String(), true
	}
	switch v.Kind() {
	case reflect.String:
		return v.String(), true
	case reflect.Bool:
		return strconv.FormatBool(v.Bool()), true
	case reflect.Int, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10), true
	case reflect.Uint64:
		return strconv.FormatUint(v.Uint(), 10), true
	case reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64), true
	}
	return "", false
}

// ParseOptions sets the options text names in o (what Options.String
// writes: an optional "[Options]" header, "name=value" lines, blank lines
// and "#" comments). Options text does not name keep their value in o. An
// unknown name or a value of the wrong form is an error wrapping
// ErrInvalidOptions; the values are checked by Open (Options.Validate).
func ParseOptions(text string, o *Options) error {
	fields := map[string]reflect.Value{}
	v := reflect.ValueOf(o).Elem()
	t := v.Type()
	for i := range t.NumField() {
		if f := t.Field(i); f.IsExported() {
			if _, ok := optionText(v.Field(i)); ok {
				fields[snakeCase(f.Name)] = v.Field(i)
			}
		}
	}
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line == "[Options]" {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		if !ok {
			return fmt.Errorf("%w: options line %d: %q is not name=value", ErrInvalidOptions, n+1, line)
		}
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		f, ok := fields[name]
		if !ok {
			return fmt.Errorf("%w: options line %d: unknown option %q", ErrInvalidOptions, n+1, name)
		}
		if err := setOption(f, value); err != nil {
			return fmt.Errorf("%w: options line %d: %s: %w", ErrInvalidOptions, n+1, name, err)
		}
	}
	return nil
}

func setOption(f reflect.Value, s string) error {
	switch f.Interface().(type) {
	case sstable.Format:
		format, err := sstable.ParseFormat(s)
		if err == nil {
			f.Set(reflect.ValueOf(format))
		}
		return err
	case FixRule:
		if r := slices.Index(fixRuleNames[:], s); r >= 0 {
			f.Set(reflect.ValueOf(FixRule(r)))
			return nil
		}
		return fmt.Errorf("fix rule %q (want every, repeated, auto or cached)", s)
	case RecordRule:
		if r := slices.Index(recordRuleNames[:], s); r >= 0 {
			f.Set(reflect.ValueOf(RecordRule(r)))
			return nil
		}
		return fmt.Errorf("record rule %q (want auto, always, never or rewriting)", s)
	}
	switch f.Kind() {
	case reflect.String:
		f.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return err
		}
		f.SetBool(b)
	case reflect.Int, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, f.Type().Bits())
		if err != nil {
			return err
		}
		f.SetInt(n)
	case reflect.Uint64:
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return err
		}
		f.SetUint(n)
	case reflect.Float64:
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return err
		}
		f.SetFloat(x)
	}
	return nil
}

// snakeCase turns a Go field name into an option name: BlockCacheSize ->
// block_cache_size, L0CompactionThreshold -> l0_compaction_threshold,
// WALBufferNoSync -> wal_buffer_no_sync.
func snakeCase(name string) string {
	var b strings.Builder
	rs := []rune(name)
	for i, r := range rs {
		if unicode.IsUpper(r) && i > 0 {
			prevLower := unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1])
			nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
			if prevLower || (nextLower && unicode.IsUpper(rs[i-1])) {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}
