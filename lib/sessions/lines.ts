import { StringDecoder } from "node:string_decoder";
import { REDACTED } from "../shared/redact";
import { sliceWhole } from "../shared/text";

/**
 * Raw characters held back when a line is cut for its length. A secret still arriving at the cut is blanked
 * whole in the next piece when the form it is echoed in is at most this long: any secret of up to 200
 * characters, even with every character a double-URL-encoded 4-byte UTF-8 sequence (20 characters each). A
 * longer form that is still arriving when its line is cut can be logged in part.
 */
export const CUT_KEEP_CHARS = 4096;
/** What stands for the cut end of a line cut under its writer. */
const CUT_WORD = "[cut]";
const WHITESPACE = /\s/;

/** Where the last word of `text` (what follows its last whitespace) starts; read from the end, in linear time. */
function lastWordStart(text: string, end = text.length): number {
  let start = end;
  while (start > 0 && !WHITESPACE.test(text[start - 1])) start -= 1;
  return start;
}

/** A line made only of base64 digits (either alphabet) and padding: possibly one line of a wrapped run. */
const BASE64_LINE = /^[A-Za-z0-9+/_=-]+\r?$/;

/**
 * Where the unfinished end of `text` (a stream closed under its writer) may hold the first characters of a secret,
 * as far as the text's shape tells: its last word; when its last line is base64 digits only, the wrapped run it
 * ends (its whole lines, held back until now, may be the encoded first bytes of a secret whose rest never came), from
 * the last word of the run's first line.
 */
function unfinishedStart(text: string): number {
  const lineStart = lastLineStart(text);
  const last = text.slice(lineStart).replace(/\n$/, "");
  if (!BASE64_LINE.test(last)) {
    // A held run's first line alone (words, then its digits; its CR taken by `push`): from its last word.
    return text.endsWith("\n") && endsInBase64Digits(last) ? lastWordStart(text, lineStart + last.length) : lastWordStart(text);
  }
  let start = lineStart;
  while (start > 0) {
    const from = text.lastIndexOf("\n", start - 2) + 1;
    const line = text.slice(from, start - 1);
    if (!BASE64_LINE.test(line) && !endsInBase64Digits(line)) break;
    start = from;
    if (!BASE64_LINE.test(line)) break;
  }
  const end = start + text.slice(start).search(/\r?\n|$/);
  return lastWordStart(text, end);
}
/** Where the last line of `text` starts; a line break ending `text` ends that line (lines held back end so). */
function lastLineStart(text: string): number {
  return text.lastIndexOf("\n", text.length - 2) + 1;
}

/**
 * Whether `text` ends with a line break after a line of base64 digits only, or after a run's first line (one ending in
 * base64 digits): lines held back as the start of a wrapped run (see `push`), whose rest may never have come.
 */
function endsWithHeldRun(text: string): boolean {
  if (!text.endsWith("\n")) return false;
  const last = text.slice(lastLineStart(text), -1);
  return BASE64_LINE.test(last) || endsInBase64Digits(last);
}

/** The last 16 characters before a line's padding: base64 digits (either alphabet) only. */
const BASE64_TAIL_DIGITS = /^[A-Za-z0-9+/_-]{16}$/;

/**
 * Whether `line` ends in at least 16 base64 digits (then padding, then a CR): long enough to be the first line of a
 * wrapped run (MIME wraps at 76, PEM at 64). Read from the line's end: a regex searching for such a tail tried it from
 * each digit of a long run that does not end the line (a server's JSON log line quoting a long output), quadratic in
 * the run's length, and held the event loop for seconds.
 */
function endsInBase64Digits(line: string): boolean {
  let end = line.endsWith("\r") ? line.length - 1 : line.length;
  while (end > 0 && line.charCodeAt(end - 1) === 0x3d) end -= 1;
  return end >= 16 && BASE64_TAIL_DIGITS.test(line.slice(end - 16, end));
}

/**
 * Where the trailing lines of `block` begin that may be the start of a base64 run wrapped over lines whose rest has not
 * come yet: from the earliest line ending in at least 16 base64 digits after which every line is base64 digits only.
 * `block.length` when there is none, or when those lines hold more than `limit` characters.
 */
function wrappedRunStart(block: string, limit: number): number {
  let start = block.length;
  for (let end = block.length; block.length - end <= limit; end -= 1) {
    const from = block.lastIndexOf("\n", end - 1) + 1;
    const line = block.slice(from, end);
    const whole = BASE64_LINE.test(line);
    if (endsInBase64Digits(line)) start = from;
    if (!whole || from === 0) break;
    end = from;
  }
  return block.length - start <= limit ? start : block.length;
}

/** How the splitter scrubs what it gives (as a `Redactor` does; the session's own is read at each use). */
export interface LineScrub {
  /** The text with each secret replaced by REDACTED. */
  text(text: string): string;
  /** Where to cut a text cut off under its writer, at `from` at the latest (see `Redactor.cutOff`). */
  cutOff(text: string, from: number): number;
}

const UNSCRUBBED: LineScrub = { text: (text) => text, cutOff: (_text, from) => from };

/**
 * Splits a byte stream into whole lines (UTF-8 safe across chunks), scrubbed with `redact`, which must replace each
 * secret with REDACTED (as a `Redactor` does). The lines a chunk completes are scrubbed together, before they are
 * split, so a secret holding a line break (a PEM key, line-wrapped base64) is blanked whole when it arrives within
 * one chunk (one write of the child, up to a pipe's 64 KiB); lines that may begin a wrapped base64 run are given only
 * with the line after the run (or at the end), so a run written over several writes is scrubbed whole too. A line
 * that grows past `maxPending` without a newline is given in pieces, cut where no secret lies across the cut.
 */
export class LineSplitter {
  private readonly decoder = new StringDecoder("utf8");
  private readonly keep: number;
  private pending = "";

  constructor(
    private readonly maxPending: number,
    private readonly redact: LineScrub = UNSCRUBBED,
    keep: number = CUT_KEEP_CHARS,
  ) {
    this.keep = Math.min(keep, Math.floor(maxPending / 2));
  }

  push(chunk: Buffer): string[] {
    const decoded = this.decoder.write(chunk);
    // Only the new text is searched: a long line arriving in small chunks is not scanned again for each.
    const newline = decoded.lastIndexOf("\n");
    if (newline < 0) {
      this.pending += decoded;
      return this.pending.length > this.maxPending ? [this.cut()] : [];
    }
    let block = this.pending + decoded.slice(0, newline);
    if (block.endsWith("\r")) block = block.slice(0, -1);
    this.pending = decoded.slice(newline + 1);
    // Lines that may begin a base64 run wrapped over lines wait for the rest of it (or the end of the stream).
    const held = wrappedRunStart(block, this.keep);
    if (held < block.length) {
      this.pending = `${block.slice(held)}\n${this.pending}`;
      if (held === 0) return this.pending.length > this.maxPending ? [this.cut()] : [];
      // Without the line break before the held lines, CR included.
      block = block.slice(0, held > 1 && block[held - 2] === "\r" ? held - 2 : held - 1);
    }
    const lines = this.redact.text(block).split(/\r?\n/);
    if (this.pending.length > this.maxPending) lines.push(this.cut());
    return lines;
  }

  /**
   * What is left, at the stream's end. `cut`: the stream was closed under the writer (not ended by it), so its last,
   * unfinished line may stop inside a secret, whose first characters no redaction recognises: the line is cut (shown
   * as `[cut]`) from its last word on, unless it ends with a redacted secret, and from wherever the first words of a
   * secret holding spaces begin that run up to there (`Redactor.cutOff`). Lines held back as the start of a wrapped
   * base64 run are cut so too, also when their last line ended with its line break (the run's rest never came).
   */
  flush(cut = false): string[] {
    const rest = this.pending + this.decoder.end();
    this.pending = "";
    if (rest === "") return [];
    let at = rest.length;
    let scrubbed: string | undefined;
    if (cut && (!rest.endsWith("\n") || endsWithHeldRun(rest))) {
      scrubbed = this.redact.text(rest);
      at = this.redact.cutOff(rest, scrubbed.endsWith(REDACTED) ? rest.length : unfinishedStart(rest));
    }
    // What was held back is whole lines, before the last unfinished one. Kept whole, it is scrubbed already: each scrub
    // is a pass per secret, and the redactor may hold hundreds.
    const kept = at === rest.length ? (scrubbed ?? this.redact.text(rest)) : this.redact.text(rest.slice(0, at));
    const lines = (kept + (at < rest.length ? CUT_WORD : "")).split(/\r?\n/);
    if (lines[lines.length - 1] === "") lines.pop();
    return lines;
  }

  /**
   * The scrubbed head of the pending text; the rest stays pending, raw. The last `keep` characters stay, so a
   * secret still arriving is matched whole once its end comes, when no matched secret lies across that cut
   * (the pieces scrub to what the whole does). Else the cut goes after the last secret matched: the text
   * after it came as it is, so the same characters of the raw text stay.
   */
  private cut(): string {
    const raw = this.pending;
    const whole = this.redact.text(raw);
    const at = sliceWhole(raw, raw.length - this.keep).length;
    const head = this.redact.text(raw.slice(0, at));
    if (head + this.redact.text(raw.slice(at)) === whole) {
      this.pending = raw.slice(at);
      return head;
    }
    const last = whole.lastIndexOf(REDACTED);
    const after = last < 0 ? whole.length : last + REDACTED.length;
    const verbatim = whole.slice(after);
    if (!raw.endsWith(verbatim)) {
      // A `redact` that does not write REDACTED leaves no known verbatim tail: the whole text goes.
      this.pending = "";
      return whole;
    }
    this.pending = verbatim;
    return whole.slice(0, after);
  }
}
