import { StringDecoder } from "node:string_decoder";

/** Splits a byte stream into whole lines (UTF-8 safe across chunks); a line longer than `maxPending` is cut. */
export class LineSplitter {
  private readonly decoder = new StringDecoder("utf8");
  private pending = "";

  constructor(private readonly maxPending: number) {}

  push(chunk: Buffer): string[] {
    const parts = (this.pending + this.decoder.write(chunk)).split(/\r?\n/);
    this.pending = parts.pop() ?? "";
    if (this.pending.length > this.maxPending) {
      parts.push(this.pending);
      this.pending = "";
    }
    return parts;
  }

  flush(): string[] {
    const rest = this.pending + this.decoder.end();
    this.pending = "";
    return rest === "" ? [] : [rest];
  }
}
