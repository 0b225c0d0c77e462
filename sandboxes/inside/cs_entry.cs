// Entry point of every C# program (compiled with it: mcs -main:RewardboxEntry). Mono's Debug.Assert only prints
// a failure and carries on; .NET (what SandboxFusion runs, and what MultiPL-E-style tests expect) ends the program.
// So a failed Debug.Assert/Trace.Assert here prints "Assertion failed: ..." on stderr and exits 1, then the
// program's own Main runs as it would (its exceptions propagate unchanged: Mono prints them and exits 1).
using System;
using System.Diagnostics;
using System.Reflection;
using System.Runtime.ExceptionServices;

sealed class RewardboxFailingListener : TraceListener
{
    public override void Write(string message) { Console.Error.Write(message); }
    public override void WriteLine(string message) { Console.Error.WriteLine(message); }
    public override void Fail(string message, string detail)
    {
        Console.Error.WriteLine("Assertion failed: " + message + (string.IsNullOrEmpty(detail) ? "" : " " + detail));
        Console.Error.Flush();
        Console.Out.Flush();
        Environment.Exit(1);
    }
}

static class RewardboxEntry
{
    static int Main(string[] args)
    {
        Trace.Listeners.Clear();
        Trace.Listeners.Add(new RewardboxFailingListener());
        MethodInfo main = null;
        foreach (Type type in Assembly.GetExecutingAssembly().GetTypes())
        {
            if (type == typeof(RewardboxEntry)) continue;
            MethodInfo m = type.GetMethod("Main", BindingFlags.Static | BindingFlags.Public | BindingFlags.NonPublic);
            if (m != null) { main = m; break; }
        }
        if (main == null)
        {
            Console.Error.WriteLine("error: no static Main method");
            return 1;
        }
        object result;
        try
        {
            result = main.Invoke(null, main.GetParameters().Length == 0 ? null : new object[] { args });
        }
        catch (TargetInvocationException e)
        {
            ExceptionDispatchInfo.Capture(e.InnerException).Throw();
            throw;
        }
        return result is int ? (int)result : 0;
    }
}
